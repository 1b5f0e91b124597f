#include "ddph/scenario/scenario_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <numeric>

#include "ddph/audit/audit.h"
#include "ddph/trace/launch_record.h"
#include "ddph/trace/trace.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/comm/local_store.h"
#include "ddph/common/error.h"
#include "ddph/common/libtorch_module.h"
#include "ddph/common/private_folder.h"
#include "ddph/config.h"
#include "ddph/launch/forked_world.h"
#include "ddph/launch/own_pss.h"
#include "ddph/scenario/rank_program.h"
#include "ddph/scenario/scenario_file.h"
#include "ddph/sampler/randperm.h"
#include "rank_report.h"
#include "scenario_plan.h"

namespace ddph::scenario {

using common::ConfigError;
using common::Error;
using common::PrivateFolder;
using common::ProtocolError;
using common::TimeoutError;
using sampler::kRandpermReplicaLimit;
using sampler::Violation;
namespace property = sampler::property;

namespace {

using Clock = std::chrono::steady_clock;

// How the forked world ended (launch.json), under a deadline of `deadlineS`.
trace::LaunchRecord launchRecordOf(const launch::ForkedWorldResult& result, double deadlineS) {
  trace::LaunchRecord record;
  record.launcher = "ddp-sim run";
  record.worldSize = static_cast<int>(result.ranks.size());
  record.timedOut = result.deadlinePassed;
  record.deadlineS = deadlineS;
  record.interruptedBy = result.interruptedBy;
  bool failed = false;
  for (const auto& r : result.ranks) {
    trace::LaunchedRank l{r.rank, r.pid, "exited", r.exitCode, r.signal, r.wasStopped};
    if (r.stoppedByUs) {
      l.outcome = result.deadlinePassed ? "timed-out" : "stopped";
    } else if (r.signal != 0) {
      l.outcome = "signaled";
    }
    failed = failed || l.outcome != "exited" || l.code != 0;
    record.ranks.push_back(std::move(l));
  }
  record.exitCode = result.interruptedBy != 0 ? 128 + result.interruptedBy : (failed ? 1 : 0);
  return record;
}

// A rank's progress, on the terminal's line.
class ProgressObserver final : public RankObserver {
 public:
  ProgressObserver(RunProgress* shown, int rank) : shown_(shown), rank_(rank) {}
  void onStep(std::int64_t epoch, std::int64_t) override {
    if (shown_) shown_->inEpoch(rank_, epoch);
  }
  void onJoined() {
    if (shown_) shown_->joined(rank_);
  }

 private:
  RunProgress* shown_;
  int rank_;
};

int rankMain(const Scenario& s, const RunOptions& options, const RankTraceTarget& trace,
             const std::string& storePath, int rank, int fd) {
  const comm::GlooOptions& engine = options.gloo;
  ProgressObserver observer(options.progress, rank);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(s.timeoutS * 1000));
  // NOTE [Connect deadline]: ranks are forked one after another and all connect on the same
  // cores, so the last rank arrives seconds after the first at large W (about 13 s at W = 512 on 2
  // loaded cores with the direct engine's sparse connect; c10d's full mesh took 240 s, NOTE [Gloo
  // engines]). The store waits, the connect and a barrier after it get max(timeout_s, 0.5 s x W);
  // every collective after that gets timeout_s.
  const auto connectTimeout =
      std::max(timeout, std::chrono::milliseconds(500 * static_cast<std::int64_t>(s.worldSize)));
  const auto start = Clock::now();
  try {
    // NOTE [Local store]: rank 0 serves the rendezvous on a Unix socket in the run's private
    // folder; nothing of the run listens on a network address but Gloo's pairs on loopback.
    std::optional<comm::LocalStoreServer> server;
    if (rank == 0) server.emplace(storePath);
    auto store = comm::connectLocalStore(storePath, connectTimeout);
    comm::GlooOptions gloo = engine;
    gloo.timeout = connectTimeout;
    gloo.hostname = comm::loopbackAddressForRank(rank);  // NOTE [Loopback address per rank]
    auto comm = comm::connectGloo(store, rank, s.worldSize, gloo);
    // Ranks finish connecting far apart at large W: meet under the connect deadline first.
    comm->barrier("connect");
    comm->setTimeout(timeout);
    observer.onJoined();
    const double connectS = std::chrono::duration<double>(Clock::now() - start).count();
    const RankRunStats stats = runRankProgram(s, *comm, observer, trace);
    // Sampled before the barrier, while every rank is alive: the sum over ranks counts each page
    // the ranks share once (own_pss.h).
    const std::optional<double> pss = launch::ownPssMb();
    comm->barrier("end of run");  // rank 0 serves the store: nobody leaves before all are done
    launch::writeLine(fd, rankReportLine({stats.steps, stats.computeSeconds, stats.waitSeconds,
                                          stats.epochSeconds, connectS, pss, stats.traceFailure}));
    return launch::kRankOk;
  } catch (const TimeoutError&) {  // the rank's trace has the error (runRankProgram)
    return launch::kRankTimeout;
  } catch (const ProtocolError&) {
    return launch::kRankPeerFailure;
  } catch (const ConfigError&) {
    return launch::kRankConfigError;
  } catch (const std::exception&) {
    return launch::kRankInternalError;
  }
}

// Whether the ranks will call into LibTorch: c10d's Gloo engine, LibTorch's samplers, or a
// shuffled epoch longer than the randperm replica reaches (randperm.h).
bool needsLibTorch(const Scenario& s, const comm::GlooOptions& engine) {
  if (engine.engine == comm::GlooEngine::kProcessGroup || !DDPH_HAVE_DIRECT_GLOO) return true;
  for (const auto& d : s.datasets) {
    if (d.sampler.rfind("libtorch", 0) == 0) return true;
    if (d.shuffle && d.size >= kRandpermReplicaLimit) return true;
  }
  return false;
}

// The verdict, over the run's trace and its launch record: the one judge (NOTE [One judge]), the
// audit's checks with what the scenario planned (its PlannedRun).
void judge(const Scenario& s, const trace::Trace& trace, RunReport& report) {
  audit::AuditReport judged = audit::judge(trace, planOf(s, trace));
  report.violations = std::move(judged.violations);
  report.notes = std::move(judged.notes);
}

// Per rank its step times and peak RSS; for the run its phases and memory.
void addTimings(const launch::ForkedWorldResult& world,
                const std::vector<std::optional<RankReport>>& ranks, double totalS,
                RunReport& report) {
  double connect = 0, run = 0, pssSum = 0;
  bool pssEverywhere = true;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    double compute = 0, wait = 0;
    if (const auto& own = ranks[r]) {
      const double steps = std::max<double>(1.0, static_cast<double>(own->steps));
      compute = own->computeS * 1000 / steps;
      wait = own->waitS * 1000 / steps;
      connect = std::max(connect, own->connectS);
      run = std::max(run, own->epochS);
    }
    if (ranks[r] && ranks[r]->pssMb) {
      pssSum += *ranks[r]->pssMb;
    } else {
      pssEverywhere = false;
    }
    report.stepComputeMs.push_back(compute);
    report.stepWaitMs.push_back(wait);
    report.peakRssMb.push_back(world.ranks[r].peakRssMb);
  }
  report.timings = {
      {"total_s", totalS}, {"spawn_s", world.spawnSeconds}, {"connect_s", connect}, {"run_s", run}};
  if (world.firstFailure) {
    report.timings.push_back(
        {"stop_after_failure_s", world.allReapedSeconds - world.firstFailureSeconds});
  }
  const double maxRss = *std::max_element(report.peakRssMb.begin(), report.peakRssMb.end());
  const double meanRss = std::accumulate(report.peakRssMb.begin(), report.peakRssMb.end(), 0.0) /
                         static_cast<double>(report.peakRssMb.size());
  report.timings.push_back({"peak_rss_mb_max", maxRss});
  report.timings.push_back({"peak_rss_mb_mean", meanRss});
  // Only when every rank finished and could read its own: a partial sum would understate it.
  if (pssEverywhere) report.timings.push_back({"pss_mb_sum", pssSum});
}

}  // namespace

RunReport runScenario(Scenario s, const RunOptions& options) {
  if (options.worldSize) s.worldSize = *options.worldSize;
  validateScenario(s);
  DDPH_ASSERT(!options.progress || options.progress->worldSize() == s.worldSize);
  const auto start = Clock::now();
  launch::ForkedWorldOptions world;
  world.worldSize = s.worldSize;
  // Every collective has its own deadline (timeout_s); the world's is a backstop above them.
  const double deadline = options.deadlineS.value_or(std::max(600.0, 4 * s.timeoutS));
  world.deadline = std::chrono::milliseconds(static_cast<std::int64_t>(deadline * 1000));
  world.grace = std::chrono::milliseconds(static_cast<std::int64_t>(options.graceS * 1000));
  // A rank that needs LibTorch gets it loaded here, once, before the fork (loaded in each rank it
  // would cost every rank its start-up); the others are forked without it, which is what makes
  // large worlds cheap to fork (NOTE [LibTorch on demand]).
  if (needsLibTorch(s, options.gloo)) libtorch::backend();
  // Every run is traced (docs/trace-format.md), and judged on its trace.
  DDPH_ASSERT(!options.trace.dir.empty());
  const RankTraceTarget& target = options.trace;
  const PrivateFolder folder("ddph-run-");
  const std::string storePath = folder.path() + "/store";
  const launch::ForkedWorldResult result = launch::runForkedWorld(
      world, [&](int rank, int fd) { return rankMain(s, options, target, storePath, rank, fd); });

  std::vector<std::optional<RankReport>> ranks;
  for (const auto& r : result.ranks) {
    ranks.push_back(findRankReport(r.output));
    if (ranks.back() && !ranks.back()->traceFailure.empty()) {  // a verdict from it would be wrong
      throw Error(fmt::format("the run's trace: {}", ranks.back()->traceFailure));
    }
  }
  trace::writeLaunchRecord(target.dir, launchRecordOf(result, deadline));
  RunReport report;
  report.scenario = s.name;
  report.source = s.source;
  report.description = s.description;
  report.worldSize = s.worldSize;
  report.interruptedBy = result.interruptedBy;
  judge(s, trace::readTrace(target.dir), report);
  report.passed = report.violations.empty() && result.interruptedBy == 0;
  addTimings(result, ranks, std::chrono::duration<double>(Clock::now() - start).count(), report);
  return report;
}

}  // namespace ddph::scenario
