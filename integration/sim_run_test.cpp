// ddp-sim run: every built-in scenario is diagnosed with its property, on real rank processes;
// failures and interrupts leave nothing running; bad scenarios run nothing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "test_support.h"

using namespace std::chrono_literals;
using Json = nlohmann::json;

namespace ddph::test_support {

using common::ChildProcess;
using common::ExitStatus;

namespace {

const std::string kSim = DDPH_DDP_SIM;

struct SimRun {
  CommandResult command;
  Json report;
};

SimRun runSim(const std::vector<std::string>& args, const std::string& marker = "") {
  TempDir dir;
  const std::string reportPath = dir.path() + "/report.json";
  std::vector<std::string> argv{kSim, "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--report");
  argv.push_back(reportPath);
  SimRun run;
  run.command = runCommand(argv, 120s, marker);
  if (std::filesystem::exists(reportPath)) run.report = Json::parse(readFile(reportPath));
  return run;
}

// The first violation's property, with the whole output on failure.
void expectDiagnosis(const SimRun& run, const std::string& property) {
  ASSERT_EQ(run.command.exitCode, 1) << run.command.out << run.command.err;
  ASSERT_FALSE(run.report.is_null()) << run.command.err;
  EXPECT_FALSE(run.report["passed"].get<bool>());
  ASSERT_FALSE(run.report["violations"].empty());
  EXPECT_EQ(run.report["violations"][0]["property"], property) << run.report.dump(2);
  EXPECT_NE(run.command.out.find("FAIL " + property), std::string::npos) << run.command.out;
  EXPECT_NE(run.command.out.find("likely cause: "), std::string::npos) << run.command.out;
}

TEST(SimRun, HealthyPasses) {
  const auto run = runSim({"healthy"});
  ASSERT_EQ(run.command.exitCode, 0) << run.command.out << run.command.err;
  EXPECT_TRUE(run.report["passed"].get<bool>());
  EXPECT_EQ(run.report["scenario"], "healthy");
  EXPECT_EQ(run.report["world_size"], 4);
  EXPECT_TRUE(run.report["violations"].empty());
  EXPECT_EQ(run.report["timings"]["per_rank"]["peak_rss_mb"].size(), 4u);
  // The ranks' proportional set sizes, summed (own_pss.h): some memory, less than their RSS summed.
  ASSERT_TRUE(run.report["timings"].contains("pss_mb_sum")) << run.report.dump();
  EXPECT_GT(run.report["timings"]["pss_mb_sum"].get<double>(), 0.0);
  EXPECT_NE(run.command.out.find("PASSED"), std::string::npos);
}

TEST(SimRun, HealthyPassesAtOtherWorldSizes) {
  // 40: above starCollectivesAbove, every collective on the star's own sockets (NOTE [Star sockets]).
  for (const char* w : {"1", "3", "8", "40"}) {
    const auto run = runSim({"healthy", "-n", w});
    EXPECT_EQ(run.command.exitCode, 0) << w << run.command.out << run.command.err;
    EXPECT_EQ(run.report["world_size"], std::stoi(w));
  }
}

TEST(SimRun, MissingSetEpochIsReshuffle) {
  const auto run = runSim({"missing-set-epoch"});
  expectDiagnosis(run, "reshuffle");
  EXPECT_EQ(run.report["violations"][0]["epoch"], 0);
}

TEST(SimRun, RankSeedSkewIsCoverageAndDisjointness) {
  const auto run = runSim({"rank-seed-skew"});
  expectDiagnosis(run, "coverage");
  EXPECT_EQ(run.report["violations"][1]["property"], "disjointness");
}

TEST(SimRun, UnsortedFileListingIsCoverage) {
  const auto run = runSim({"unsorted-file-listing"});
  expectDiagnosis(run, "coverage");
  EXPECT_EQ(run.report["violations"][1]["property"], "disjointness");
}

TEST(SimRun, ZipTruncationCountsUnvisitedSamplesPerDataset) {
  const auto run = runSim({"zip-truncation"});
  expectDiagnosis(run, "coverage");
  const auto& violations = run.report["violations"];
  ASSERT_EQ(violations.size(), 1u) << run.report.dump(2);  // mnist, once: the same in 2 epochs
  const auto& v = violations[0];
  EXPECT_NE(v["detail"].get<std::string>().find("loader 0 (mnist, 60000 samples)"), std::string::npos)
      << v.dump();
  EXPECT_NE(v["detail"].get<std::string>().find("10000 of 60000 indices"), std::string::npos)
      << v.dump();
  EXPECT_EQ(v["notes"], Json::array({"the same in 2 epochs"})) << v.dump();
  EXPECT_NE(run.command.out.find("dataset mnist: 10000 of 60000 samples not visited"),
            std::string::npos);
  EXPECT_EQ(run.command.out.find("dataset cifar10:"), std::string::npos) << "cifar10 is complete";
}

TEST(SimRun, UnevenBatchesAreACollectiveMismatchNotAHang) {
  const auto run = runSim({"uneven-batches-hang"});
  expectDiagnosis(run, "collective-mismatch");
  const auto& v = run.report["violations"][0];
  EXPECT_EQ(v["ranks"], Json::array({2, 3}));
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["step"], 25);
  // A collective-mismatch, not a rank-failure: the step agreement found it, not the 60 s timeout.
}

TEST(SimRun, DropLastConfusionIsCoverage) {
  const auto run = runSim({"drop-last-confusion"});
  expectDiagnosis(run, "coverage");
  EXPECT_NE(run.report["violations"][0]["detail"].get<std::string>().find("104 of 1000"),
            std::string::npos);
}

TEST(SimRun, PaddingInflatesEvalShowsDuplicatesAndSkew) {
  const auto run = runSim({"padding-inflates-eval"});
  expectDiagnosis(run, "no-duplicates");  // the audit's name for it (was disjointness, #28)
  const auto& v = run.report["violations"][0];
  const std::string detail = v["detail"];
  EXPECT_NE(detail.find("7 counted twice"), std::string::npos) << detail;
  // The metric over the scenario's labels is the plan's, a note on the audit's finding.
  const std::string metric = v["notes"].dump();
  EXPECT_NE(metric.find("1008 evaluated, 7 duplicates"), std::string::npos) << metric;
  EXPECT_NE(metric.find("skew"), std::string::npos) << metric;
}

TEST(SimRun, TinyDatasetManyRanksIsCoverage) {
  const auto run = runSim({"tiny-dataset-many-ranks"});
  expectDiagnosis(run, "coverage");
  EXPECT_EQ(run.report["world_size"], 16);
  EXPECT_NE(run.report["violations"][0]["detail"].get<std::string>().find("10 of 10"),
            std::string::npos);
}

TEST(SimRun, RankCrashIsNamedAndNothingIsLeftRunning) {
  const auto marker = uniqueMarker();
  const auto run = runSim({"rank-crash"}, marker);
  expectDiagnosis(run, "rank-failure");
  const auto& v = run.report["violations"][0];
  EXPECT_EQ(v["ranks"], Json::array({2}));
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_EQ(v["step"], 3);
  EXPECT_NE(v["detail"].get<std::string>().find("killed by signal 9 (SIGKILL)"), std::string::npos);
  EXPECT_TRUE(processesWithMarker(marker).empty()) << "orphan rank processes";
}

// The others are stopped by the supervisor, not by their collective timeout: with an hour of it,
// the run still ends (exit 1, rank-failure) within runSim's 120 s deadline.
TEST(SimRun, RankCrashStopsTheOthersLongBeforeTheirTimeout) {
  TempDir dir;
  const std::string path = dir.path() + "/crash.toml";
  std::ofstream(path) << "name = \"crash\"\nworld_size = 4\nepochs = 2\nbatch_size = 32\n"
                         "timeout_s = 3600\n[[datasets]]\nsize = 2000\n[faults]\n"
                         "kill = { rank = 2, epoch = 0, step = 3 }\n";
  const auto marker = uniqueMarker();
  const auto run = runSim({path}, marker);
  expectDiagnosis(run, "rank-failure");
  EXPECT_EQ(run.report["violations"][0]["ranks"], Json::array({2}));
  EXPECT_TRUE(processesWithMarker(marker).empty()) << "orphan rank processes";
}

TEST(SimRun, SlowRankIsAStraggler) {
  // 250 ms of sleep a step on rank 1: its compute is at least that on any machine, and a loaded
  // one adds to every rank alike, so the 3x-the-median rule holds under load too.
  TempDir dir;
  const std::string path = dir.path() + "/slow.toml";
  std::ofstream(path) << "name = \"slow\"\nworld_size = 4\nbatch_size = 16\n[[datasets]]\n"
                         "size = 320\n[faults]\ndelay = { rank = 1, ms = 250 }\n";
  const auto run = runSim({path});
  expectDiagnosis(run, "straggler");
  EXPECT_EQ(run.report["violations"][0]["ranks"], Json::array({1}));
  const auto& compute = run.report["timings"]["per_rank"]["step_compute_ms"];
  EXPECT_GE(compute[1].get<double>(), 250.0);
  EXPECT_GT(compute[1].get<double>(), 3 * compute[0].get<double>());
}

// Stopped after 13 steps on 4 ranks, resumed on 3: DistributedSampler restarts the epoch, keeping
// per-rank positions repeats samples, the elastic sampler takes the rest once.
TEST(SimRun, ElasticResumeNaiveBugsAndTheFix) {
  const auto restart = runSim({"elastic-resume"});
  expectDiagnosis(restart, "resume-exactly-once");
  const std::string detail = restart.report["violations"][0]["detail"];
  EXPECT_NE(detail.find("416 extra copies where padding allows 2"), std::string::npos) << detail;
  EXPECT_NE(detail.find("ignores the resume and restarts the epoch"), std::string::npos) << detail;
  const auto positions = runSim({"elastic-resume-per-rank"});
  expectDiagnosis(positions, "resume-exactly-once");
  EXPECT_NE(positions.report["violations"][0]["detail"].get<std::string>().find(
                "per-rank positions kept across the change of world size"),
            std::string::npos);
  const auto fixed = runSim({"elastic-resume-fixed"});
  EXPECT_EQ(fixed.command.exitCode, 0) << fixed.command.out << fixed.command.err;
  EXPECT_NE(fixed.command.out.find("stopped after 104 samples a rank on 4 ranks, resumed on 3"),
            std::string::npos)
      << fixed.command.out;
}

// One verifier: every run writes its ranks' trace, and `ddp-sim audit` of that trace (the checks
// that judge real scripts) reaches run's verdict: the same pass or fail, the same first property,
// on the same ranks, epoch and step.
// Not alike (docs/ddp-sim.md): drop-last-confusion (a real program's DataLoader(drop_last=True)
// is a choice the audit does not judge), slow-rank (straggler is run's own check over the trace),
// the elastic-resume scenarios (the audit lacks the resume properties).
TEST(SimRun, TheAuditOfItsTraceReachesTheSameVerdict) {
  for (const char* scenario :
       {"healthy", "missing-set-epoch", "rank-seed-skew", "unsorted-file-listing", "zip-truncation",
        "uneven-batches-hang", "padding-inflates-eval", "tiny-dataset-many-ranks", "rank-crash",
        "rank-stopped"}) {
    SCOPED_TRACE(scenario);
    TempDir dir;
    const std::string traces = dir.path() + "/trace";
    const auto run = runSim({scenario, "--trace-dir", traces});
    ASSERT_FALSE(run.report.is_null()) << run.command.out << run.command.err;
    ASSERT_TRUE(std::filesystem::exists(traces + "/rank-0.jsonl")) << run.command.err;
    const std::string auditPath = dir.path() + "/audit.json";
    const auto audit = runCommand({kSim, "audit", traces, "--report", auditPath, "-q"}, 120s);
    ASSERT_TRUE(std::filesystem::exists(auditPath)) << audit.out << audit.err;
    const Json verdict = Json::parse(readFile(auditPath));
    EXPECT_EQ(audit.exitCode, run.command.exitCode) << audit.out << run.command.out;
    EXPECT_EQ(verdict["passed"], run.report["passed"]) << verdict.dump(2);
    if (!run.report["violations"].empty()) {
      ASSERT_FALSE(verdict["violations"].empty()) << verdict.dump(2);
      for (const char* key : {"property", "ranks", "epoch", "step"}) {
        EXPECT_EQ(verdict["violations"][0][key], run.report["violations"][0][key])
            << key << "\n"
            << verdict.dump(2) << run.report.dump(2);
      }
    }
  }
}

// The causes a run's own configuration explains are the violations' own, never contradicted by
// the catalogue's usual one (which names per-rank seeds for every lost sample).
TEST(SimRun, ConfigurationCausesAreTheLikelyCauseAlone) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"zip-truncation", "zip() stops with the shortest loader"},
      {"padding-inflates-eval", "DistributedSampler pads validation"},
      {"tiny-dataset-many-ranks", "DistributedSampler(drop_last=True) with N = 10 < W = 16"},
      {"drop-last-confusion", "DataLoader(drop_last=True) drops the last"}};
  for (const auto& [scenario, cause] : cases) {
    const auto run = runSim({scenario});
    EXPECT_NE(run.report["violations"][0]["likely_cause"].get<std::string>().find(cause),
              std::string::npos)
        << run.report.dump(2);
    EXPECT_NE(run.command.out.find("likely cause: " + cause), std::string::npos) << run.command.out;
    EXPECT_EQ(run.command.out.find("usual cause"), std::string::npos) << run.command.out;
    EXPECT_EQ(run.command.out.find("seed"), std::string::npos) << run.command.out;
  }
}

// NOTE [Local store]: while a run lasts, every listening socket of the run and its ranks is on
// loopback (the store is a Unix socket; Gloo listens on 127.0.1.x). Sampled from /proc/net/tcp*
// from the first process to the run's end.
TEST(SimRun, NoSocketListensBeyondLoopback) {
  {  // The check itself can fail: a socket on every interface is seen as such.
    const int any = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ASSERT_EQ(::bind(any, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(any, 1), 0);
    const auto mine = listeningSockets({::getpid()});
    ::close(any);
    ASSERT_EQ(mine.size(), 1u);
    EXPECT_FALSE(mine[0].loopback) << mine[0].address;
    EXPECT_EQ(mine[0].address.rfind("0.0.0.0:", 0), 0u) << mine[0].address;
  }
  TempDir dir;
  const std::string path = dir.path() + "/steps.toml";
  std::ofstream(path) << "world_size = 4\nepochs = 1\nbatch_size = 1\n[[datasets]]\nsize = 4000\n";
  for (const char* engine : {"direct", "process-group"}) {
    SCOPED_TRACE(engine);
    const auto marker = uniqueMarker();
    ChildProcess run({kSim, "run", path},
                     childOptions({{kMarkerVariable, marker}, {"DDPH_GLOO_ENGINE", engine}},
                                  dir.path() + "/out", dir.path() + "/err"));
    int samples = 0, withRanks = 0, listeners = 0;
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    std::optional<ExitStatus> status;
    while (!(status = run.poll()) && std::chrono::steady_clock::now() < deadline) {
      const auto pids = processesWithMarker(marker);
      for (const auto& l : listeningSockets(pids)) {
        ++listeners;
        EXPECT_TRUE(l.loopback) << "listening on " << l.address;
      }
      ++samples;
      withRanks += pids.size() == 5 ? 1 : 0;
    }
    ASSERT_TRUE(status.has_value()) << "the run outlived 300 s";
    EXPECT_EQ(status->code, 0) << readFile(dir.path() + "/err");
    EXPECT_GT(withRanks, 0) << "never saw the run and its 4 ranks in " << samples << " samples";
    std::printf("%s: %d samples, %d with every rank, %d listening sockets, all on loopback\n",
                engine, samples, withRanks, listeners);
  }
}

TEST(SimRun, BadScenarioFileRunsNothing) {
  TempDir dir;
  const std::string path = dir.path() + "/bad.toml";
  std::ofstream(path) << "world_size = 4\n[[datasets]]\nsize = 100\nshufle = true\n";
  const auto run = runSim({path});
  EXPECT_EQ(run.command.exitCode, 2);
  EXPECT_TRUE(run.report.is_null()) << "no report for a scenario that did not run";
  EXPECT_NE(run.command.err.find(path + ":4: key 'datasets[0].shufle': unknown key"),
            std::string::npos)
      << run.command.err;
  const auto unknown = runSim({"no-such-scenario"});
  EXPECT_EQ(unknown.command.exitCode, 2);
}

TEST(SimRun, ScenarioFileWithCombinations) {
  TempDir dir;
  const std::string path = dir.path() + "/mix.toml";
  for (const char* combine : {"cycle", "concat", "weighted"}) {
    std::ofstream(path) << "name = \"mix\"\nworld_size = 3\nbatch_size = 8\ncombine = \"" << combine
                        << "\"\n"
                        << (std::string(combine) == "weighted" ? "weights = [3, 1]\n" : "")
                        << "[[datasets]]\nname = \"a\"\nsize = 300\n[[datasets]]\nname = "
                           "\"b\"\nsize = 120\n";
    const auto run = runSim({path});
    // cycle re-reads b (extra copies), and says that cycling is why (not the catalogue's usual
    // cause, ranks that disagree on the order); concat and weighted visit everything once.
    if (std::string(combine) == "cycle") {
      expectDiagnosis(run, "disjointness");
      const std::string cause = run.report["violations"][0].value("likely_cause", "");
      EXPECT_NE(cause.find("cycling restarts b's loader"), std::string::npos) << cause;
      EXPECT_EQ(cause.find("seed every rank"), std::string::npos) << cause;
    } else {
      EXPECT_EQ(run.command.exitCode, 0) << combine << run.command.out << run.command.err;
    }
  }
}

TEST(SimRun, CollectiveTimeoutNamesTheRankThatNeverArrived) {
  TempDir dir;
  const std::string path = dir.path() + "/stuck.toml";
  std::ofstream(path) << "name = \"stuck\"\nworld_size = 4\ntimeout_s = 1\nbatch_size = 10\n"
                         "[[datasets]]\nsize = 100\n[faults]\ndelay = { rank = 1, ms = 600000 }\n";
  const auto marker = uniqueMarker();
  const auto run = runSim({path}, marker);
  expectDiagnosis(run, "rank-failure");
  const auto& v = run.report["violations"][0];
  EXPECT_EQ(v["ranks"], Json::array({1})) << v.dump();
  EXPECT_EQ(v["step"], 0);
  EXPECT_NE(v["detail"].get<std::string>().find("timed out after 1000 ms"), std::string::npos)
      << v.dump();
  EXPECT_TRUE(processesWithMarker(marker).empty());  // rank 1, still asleep, was killed
}

// A hang, not a crash: rank 1 stops itself (SIGSTOP) before step 3 and stays alive, holding its
// sockets. The others time out in that step's collective; the report names rank 1 as the rank that
// never arrived, and as stopped; the supervisor's SIGTERM + SIGCONT takes it down.
TEST(SimRun, AStoppedRankIsAHangNamedAsTheRankThatNeverArrived) {
  const auto marker = uniqueMarker();
  const auto run = runSim({"rank-stopped"}, marker);
  expectDiagnosis(run, "rank-failure");
  const auto& v = run.report["violations"][0];
  EXPECT_EQ(v["ranks"], Json::array({1})) << v.dump();
  EXPECT_EQ(v["epoch"], 0) << v.dump();
  EXPECT_EQ(v["step"], 3) << v.dump();
  const std::string detail = v["detail"];
  EXPECT_NE(detail.find("rank 1 never reached the collective the others waited in"),
            std::string::npos)
      << detail;
  EXPECT_NE(detail.find("(rank 1 was stopped, not crashed: state T"), std::string::npos) << detail;
  EXPECT_NE(detail.find("timed out after 5000 ms"), std::string::npos) << detail;
  EXPECT_TRUE(processesWithMarker(marker).empty());
}

TEST(SimRun, RunDeadlineStopsEverything) {
  TempDir dir;  // rank 1 sleeps 10 minutes in its first step: only the deadline ends the run
  const std::string path = dir.path() + "/asleep.toml";
  std::ofstream(path) << "name = \"asleep\"\nworld_size = 4\nbatch_size = 10\n[[datasets]]\n"
                         "size = 100\n[faults]\ndelay = { rank = 1, ms = 600000 }\n";
  const auto marker = uniqueMarker();
  const auto run = runSim({path, "--timeout", "0.5"}, marker);
  expectDiagnosis(run, "rank-failure");
  EXPECT_NE(run.report["violations"][0]["detail"].get<std::string>().find(
                "outlived its deadline of 0.5 s"),
            std::string::npos);
  EXPECT_TRUE(processesWithMarker(marker).empty());
}

TEST(SimRun, SigintStopsEveryRank) {
  TempDir dir;
  const std::string path = dir.path() + "/long.toml";
  std::ofstream(path) << "world_size = 4\nbatch_size = 1\n[[datasets]]\nsize = 4000\n"
                         "[faults]\ndelay = { rank = 0, ms = 20 }\n";
  const auto marker = uniqueMarker();
  ChildProcess run({kSim, "run", path},
                   childOptions({{kMarkerVariable, marker}}, dir.path() + "/out", dir.path() + "/err"));
  // The run and its 4 forked ranks (all named ddp-sim; forked ranks never exec).
  ASSERT_TRUE(eventually([&] { return processesWithMarker(marker, "ddp-sim").size() == 5; }, 120s))
      << readFile(dir.path() + "/err");
  run.signal(SIGINT);
  EXPECT_EQ(exitCodeBy(run, std::chrono::steady_clock::now() + 30s), 128 + SIGINT)
      << readFile(dir.path() + "/err");
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 5s).empty());
}

}  // namespace
}  // namespace ddph::test_support
