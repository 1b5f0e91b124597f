// The fork server of `ddp-sim launch`: a Python program's ranks forked from one interpreter that
// imported torch once must be indistinguishable from exec'd ranks (--exec) in what the program
// sees, prints, records and how it ends; what the server cannot run is exec'd with one line why;
// a killed launcher leaves neither ranks nor server.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "test_support.h"

using namespace std::chrono_literals;
using nlohmann::json;

namespace ddph::test_support {

using common::ChildProcess;

namespace {

const std::string kSim = DDPH_DDP_SIM;
const std::string kPython = DDPH_PYTHON;
const std::string kAuditPrograms = DDPH_AUDIT_PROGRAMS_DIR;
const std::string kPrograms = std::string(DDPH_AUDIT_PROGRAMS_DIR) + "/../launch_programs";
const std::string kNote = "ddp-sim launch: each rank execs the program";

#define SKIP_WITHOUT_PYTHON() \
  if (kPython.empty()) GTEST_SKIP() << "no Python that imports torch"

// `ddp-sim launch [--exec] EXTRA -- python3 ARGS`.
CommandResult launchPython(bool exec, std::vector<std::string> extra, std::vector<std::string> args,
                           const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv{kSim, "launch"};
  if (exec) argv.push_back("--exec");
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", kPython});
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, 600s, "", env);
}

// The lines of `text` that rank `rank` printed, without the "[rankR]: " prefix.
std::vector<std::string> rankLines(const std::string& text, int rank) {
  const std::string prefix = "[rank" + std::to_string(rank) + "]: ";
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line.substr(prefix.size()));
  }
  return lines;
}

// A trace file's events without what differs between any two runs (times, pids, the run's id).
std::vector<json> comparableEvents(const std::string& path) {
  std::vector<json> events;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    json event = json::parse(line);
    for (const char* key : {"t", "pid", "start_unix", "run_id"}) event.erase(key);
    events.push_back(std::move(event));
  }
  return events;
}

json readJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(ForkServer, ARankSeesWhatAnExecdRankSees) {
  SKIP_WITHOUT_PYTHON();
  const std::vector<std::string> program = {"-u", kPrograms + "/rank_probe.py", "--an", "argument"};
  const auto forked = launchPython(false, {"-n", "2"}, program);
  const auto execd = launchPython(true, {"-n", "2"}, program);
  ASSERT_EQ(forked.exitCode, 0) << forked.err;
  ASSERT_EQ(execd.exitCode, 0) << execd.err;
  EXPECT_EQ(forked.err.find(kNote), std::string::npos) << forked.err;  // forked, not exec'd
  std::vector<json> seeds;
  for (int rank = 0; rank < 2; ++rank) {
    const auto f = rankLines(forked.out, rank);
    const auto e = rankLines(execd.out, rank);
    ASSERT_EQ(f.size(), 2u) << forked.out;
    ASSERT_EQ(e.size(), 2u) << execd.out;
    const json seen = json::parse(f[0]), expected = json::parse(e[0]);
    for (const auto& [key, value] : expected.items()) {
      EXPECT_EQ(seen[key], value) << "rank " << rank << " sees another " << key;
    }
    EXPECT_EQ(seen.size(), expected.size());
    seeds.push_back(json::parse(f[1]));
  }
  // A forked rank's random state is its own, as a fresh interpreter's: Python's, torch's, numpy's.
  for (const char* generator : {"random", "torch", "np"}) {
    EXPECT_NE(seeds[0][generator], seeds[1][generator]) << generator << " is shared by the ranks";
  }
}

TEST(ForkServer, LossesAndTraceAreAnExecdRanks) {
  SKIP_WITHOUT_PYTHON();
  TempDir dir("ddph-fork-server");
  const std::string program = kPrograms + "/ddp_losses.py";
  const auto forked = launchPython(false, {"-n", "3", "--audit", "--trace-dir", dir.path() + "/f"}, {program});
  const auto execd = launchPython(true, {"-n", "3", "--audit", "--trace-dir", dir.path() + "/e"}, {program});
  ASSERT_EQ(forked.exitCode, 0) << forked.out << forked.err;
  ASSERT_EQ(execd.exitCode, 0) << execd.out << execd.err;
  for (int rank = 0; rank < 3; ++rank) {
    auto f = rankLines(forked.out, rank), e = rankLines(execd.out, rank);
    EXPECT_EQ(f, e) << "rank " << rank;  // losses, the signal handler's line, atexit's, in order
    ASSERT_EQ(f.size(), 4u) << forked.out;
    EXPECT_EQ(f[2], "rank " + std::to_string(rank) + " handled SIGUSR1");
    EXPECT_EQ(f[3], "rank " + std::to_string(rank) + " atexit");
    const std::string file = "/rank-" + std::to_string(rank) + ".jsonl";
    const auto forkedTrace = comparableEvents(dir.path() + "/f" + file);
    EXPECT_GT(forkedTrace.size(), 40u);
    EXPECT_EQ(forkedTrace, comparableEvents(dir.path() + "/e" + file)) << "rank " << rank;
  }
}

TEST(ForkServer, ARankEndsAsAnExecdOne) {
  SKIP_WITHOUT_PYTHON();
  // The launcher's own last line names the rank's pid: compare what comes before it.
  const std::regex pid(R"(\(pid [0-9]+\))");
  for (const std::string how : {"raise", "3", "0", "syntax"}) {
    const std::vector<std::string> program = {kPrograms + "/ends_badly.py", how};
    const auto forked = launchPython(false, {"-n", "1"}, program);
    const auto execd = launchPython(true, {"-n", "1"}, program);
    EXPECT_EQ(forked.exitCode, execd.exitCode) << how;
    EXPECT_EQ(std::regex_replace(forked.err, pid, "(pid)"), std::regex_replace(execd.err, pid, "(pid)"))
        << how;
  }
  const auto raised = launchPython(false, {"-n", "1"}, {kPrograms + "/ends_badly.py", "raise"});
  EXPECT_NE(raised.err.find("[rank0]: Traceback (most recent call last):\n[rank0]:   File \"" +
                            kPrograms + "/ends_badly.py\", line"),
            std::string::npos)
      << "the traceback starts at the program's first frame: " << raised.err;
  EXPECT_NE(raised.err.find("[rank0]: ValueError: a bad sample in shard"), std::string::npos);
  EXPECT_NE(raised.err.find("exited with code 1"), std::string::npos) << raised.err;
  const auto three = launchPython(false, {"-n", "1"}, {kPrograms + "/ends_badly.py", "3"});
  EXPECT_NE(three.err.find("exited with code 3"), std::string::npos) << three.err;
  // A file the program never closed is flushed at its exit, as the interpreter's teardown would
  // (NOTE [Forked ranks' exit]).
  TempDir dir("ddph-fork-server");
  const std::string left = dir.path() + "/left-open.txt";
  const auto open = launchPython(false, {"-n", "1"}, {kPrograms + "/ends_badly.py", "leave-open", left});
  EXPECT_EQ(open.exitCode, 0) << open.err;
  std::ifstream in(left);
  std::string line;
  EXPECT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "written, never closed");
}

// Programs whose ranks spawn, use DataLoader workers, fail, stop early: the audit finds the same
// either way. Runs whose findings race (which peers the launcher stopped before they reached the
// collective) compare their first finding's property and cause.
TEST(ForkServer, AuditProgramsGiveTheSameFindingsEitherWay) {
  SKIP_WITHOUT_PYTHON();
  TempDir dir("ddph-fork-server");
  struct Case {
    std::vector<std::string> args;
    int ranks;
    bool exact;
    bool cpu = false;  ///< a GPU program, run with --cpu
  };
  const std::vector<Case> cases = {
      {{"healthy.py"}, 4, true},
      {{"missing_set_epoch.py"}, 4, true},
      {{"per_rank_seed.py"}, 4, true},
      {{"zip_truncation.py"}, 4, true},
      {{"set_epoch_after_iter.py"}, 4, true},  // DataLoader worker processes
      {{"iterable_unsharded.py"}, 4, true},
      {{"cpu_spawn.py", "--forget-set-epoch"}, 1, true},  // torch.multiprocessing.spawn in a rank
      {{"early_stop_rank0.py"}, 4, false},
      {{"corrupt_sample.py"}, 4, false},
      {{"gpu_torchrun.py", "3", "1", "--forget-set-epoch"}, 2, true, true},  // nccl, .to(rank), AMP
  };
  for (const auto& c : cases) {
    json reports[2];
    for (int exec = 0; exec < 2; ++exec) {
      const std::string report = dir.path() + "/" + c.args[0] + std::to_string(exec) + ".json";
      std::vector<std::string> args = c.args;
      args[0] = kAuditPrograms + "/" + args[0];
      std::vector<std::string> extra = {"-n", std::to_string(c.ranks), "--audit", "--report", report,
                                        "--timeout", "300"};
      if (c.cpu) extra.push_back("--cpu");
      const auto r = launchPython(exec == 1, extra, args, {{"TMPDIR", dir.path()}});
      ASSERT_NE(r.exitCode, -1) << c.args[0];
      if (exec == 0) {
        EXPECT_EQ(r.err.find(kNote), std::string::npos) << c.args[0] << " forked: " << r.err;
      }
      reports[exec] = readJson(report);
    }
    const json& f = reports[0];
    const json& e = reports[1];
    ASSERT_FALSE(e["violations"].empty() && c.args[0] != "healthy.py") << c.args[0];
    if (c.exact) {
      for (const char* key : {"passed", "violations", "notes", "not_applicable", "seen", "ranks_traced"})
        EXPECT_EQ(f[key], e[key]) << c.args[0] << ": " << key;
      continue;
    }
    ASSERT_FALSE(f["violations"].empty()) << c.args[0];
    // Which peers had entered the last collective when the launcher stopped them is timing's.
    for (const char* key : {"property", "likely_cause"})
      EXPECT_EQ(f["violations"][0][key], e["violations"][0][key]) << c.args[0] << ": " << key;
  }
}

TEST(ForkServer, WhatTheServerCannotRunIsExecdWithTheReason) {
  SKIP_WITHOUT_PYTHON();
  const auto code = launchPython(false, {"-n", "2"}, {"-c", "import os; print('rank', os.environ['RANK'])"});
  EXPECT_EQ(code.exitCode, 0) << code.err;
  EXPECT_NE(code.err.find(kNote + " (the program is given with -c)"), std::string::npos) << code.err;
  EXPECT_NE(code.out.find("[rank1]: rank 1"), std::string::npos) << code.out;
  // A thread alive from the interpreter's start (a site agent): forking would lose it.
  const auto thread = launchPython(false, {"-n", "2"}, {kPrograms + "/ends_badly.py", "0"},
                                   {{"PYTHONPATH", kPrograms + "/thread_at_startup"}});
  EXPECT_EQ(thread.exitCode, 0) << thread.err;
  EXPECT_NE(thread.err.find(kNote + " (2 threads were alive after importing torch"), std::string::npos)
      << thread.err;
  EXPECT_EQ(std::count(thread.err.begin(), thread.err.end(), '\n'), 2) << "one line: " << thread.err;
}

TEST(ForkServer, AKilledLauncherLeavesNeitherRanksNorServer) {
  SKIP_WITHOUT_PYTHON();
  TempDir dir("ddph-fork-server");
  const auto marker = uniqueMarker();
  // Each rank writes its pid, then waits for a signal that never comes.
  const std::string program =
      "import os, signal\n"
      "open(os.path.join(os.environ['OUT'], os.environ['RANK']), 'w').write(str(os.getpid()))\n"
      "signal.pause()\n";
  const std::string script = dir.path() + "/wait.py";
  std::ofstream(script) << program;
  ChildProcess launcher({kSim, "launch", "-n", "3", "--", kPython, script},
                        childOptions({{kMarkerVariable, marker}, {"OUT", dir.path()}},
                                     dir.path() + "/out", dir.path() + "/err"));
  for (const char* rank : {"0", "1", "2"}) ASSERT_TRUE(fileWritten(dir.path() + "/" + rank, 300s));
  std::ifstream err(dir.path() + "/err");
  const std::string said((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_EQ(said.find(kNote), std::string::npos) << "forked: " << said;
  launcher.signal(SIGKILL);  // no chance to clean up: PR_SET_PDEATHSIG, server then ranks
  EXPECT_EQ(exitCodeBy(launcher, std::chrono::steady_clock::now() + 10s), 128 + SIGKILL);
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 30s).empty());
}

}  // namespace
}  // namespace ddph::test_support
