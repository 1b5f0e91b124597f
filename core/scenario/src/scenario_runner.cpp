#include "ddph/scenario/scenario_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "ddph/audit/audit.h"
#include "ddph/audit/launch_record.h"
#include "ddph/audit/trace.h"
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
#include "ddph/verify/randperm.h"
#include "straggler_check.h"

namespace ddph::scenario {

using common::ConfigError;
using common::Error;
using common::PrivateFolder;
using common::ProtocolError;
using common::TimeoutError;
using verify::kRandpermReplicaLimit;
using verify::Violation;
namespace property = verify::property;

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

// A rank's observer: JSON lines to the supervisor, progress to the terminal's line.
class PipeObserver final : public RankObserver {
 public:
  PipeObserver(int fd, RunProgress* shown, int rank) : fd_(fd), shown_(shown), rank_(rank) {}
  void onStep(std::int64_t epoch, std::int64_t) override {
    if (shown_) shown_->inEpoch(rank_, epoch);
  }
  void onJoined() {
    if (shown_) shown_->joined(rank_);
  }
  void onViolation(const Violation& v) override {
    send({{"t", "violation"}, {"property", v.property}, {"ranks", v.ranks}, {"epoch", v.epoch},
          {"step", v.step}, {"detail", v.detail}, {"likely_cause", v.likelyCause}});
  }
  void onNote(const std::string& line) override { send({{"t", "note"}, {"text", line}}); }
  void send(const Json& j) { launch::writeLine(fd_, j.dump()); }

 private:
  int fd_;
  RunProgress* shown_;
  int rank_;
};

int rankMain(const Scenario& s, const RunOptions& options, const RankTraceTarget& trace,
             const std::string& storePath, int rank, int fd) {
  const comm::GlooOptions& engine = options.gloo;
  RunProgress* shown = options.progress;
  PipeObserver observer(fd, shown, rank);
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
    observer.send({{"t", "done"},
                   {"steps", stats.steps},
                   {"compute_s", stats.computeSeconds},
                   {"wait_s", stats.waitSeconds},
                   {"epoch_s", stats.epochSeconds},
                   {"connect_s", connectS},
                   {"pss_mb", pss ? Json(*pss) : Json(nullptr)},
                   {"mismatch", stats.stoppedOnMismatch},
                   {"trace_failure", stats.traceFailure}});
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

struct Parsed {
  std::vector<Violation> violations;
  std::vector<std::string> notes;
  std::optional<Json> done;
};

Parsed parseOutput(const std::string& output) {
  Parsed p;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("t")) continue;  // a half line from a killed rank
    const std::string t = j["t"];
    if (t == "violation") {
      Violation v;
      v.property = j["property"];
      v.ranks = j["ranks"].get<std::vector<std::int64_t>>();
      v.epoch = j["epoch"];
      v.step = j["step"];
      v.detail = j["detail"];
      v.likelyCause = j.value("likely_cause", "");
      p.violations.push_back(std::move(v));
    } else if (t == "note") {
      p.notes.push_back(j["text"]);
    } else if (t == "done") {
      p.done = j;
    }
  }
  return p;
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

bool has(const std::vector<Violation>& violations, std::string_view property) {
  return std::any_of(violations.begin(), violations.end(),
                     [&](const Violation& v) { return v.property == property; });
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
  // Every run is traced (docs/trace-format.md): its rank failures are judged on the trace.
  DDPH_ASSERT(!options.trace.dir.empty());
  const RankTraceTarget& target = options.trace;
  const PrivateFolder folder("ddph-run-");
  const std::string storePath = folder.path() + "/store";
  const launch::ForkedWorldResult result = launch::runForkedWorld(
      world, [&](int rank, int fd) { return rankMain(s, options, target, storePath, rank, fd); });

  RunReport report;
  report.scenario = s.name;
  report.source = s.source;
  report.description = s.description;
  report.worldSize = s.worldSize;
  report.interruptedBy = result.interruptedBy;
  std::vector<Parsed> parsed;
  for (const auto& r : result.ranks) parsed.push_back(parseOutput(r.output));
  for (const auto& p : parsed) {
    report.violations.insert(report.violations.end(), p.violations.begin(), p.violations.end());
    report.notes.insert(report.notes.end(), p.notes.begin(), p.notes.end());
  }

  // rank-failure, diagnosed once: by the audit, from the trace and the world's launch record. A run
  // stopped by its deadline is reported as that first: what the finished ranks found (a
  // straggler, say) is secondary to the run not finishing. A rank's own failure follows the
  // violations the ranks reported (a collective mismatch explains the failure it causes).
  for (const auto& p : parsed) {  // a verdict from a trace cut short would be wrong: none
    if (p.done && !p.done->value("trace_failure", "").empty()) {
      throw Error(
          fmt::format("the run's trace: {}", (*p.done)["trace_failure"].get<std::string>()));
    }
  }
  audit::writeLaunchRecord(target.dir, audit::launchRecordOf(result, deadline));
  const audit::Trace trace = audit::readTrace(target.dir);
  // The audit's rank checks: the same diagnosis `ddp-sim launch --audit` gives a real script.
  std::vector<Violation> failures = audit::auditRankFailures(trace);
  // Over the step times of ranks that all ran to their end in step (a mismatch stops them early).
  if (failures.empty() && !has(report.violations, property::kCollectiveMismatch)) {
    if (auto slow = findStragglers(trace)) report.violations.push_back(std::move(*slow));
  }
  report.violations.insert(
      result.deadlinePassed ? report.violations.begin() : report.violations.end(),
      std::make_move_iterator(failures.begin()), std::make_move_iterator(failures.end()));
  report.passed = report.violations.empty() && result.interruptedBy == 0;

  double connect = 0, run = 0, pssSum = 0;
  bool pssEverywhere = true;
  for (std::size_t r = 0; r < parsed.size(); ++r) {
    const auto& p = parsed[r];
    double compute = 0, wait = 0;
    if (p.done) {
      const double steps = std::max<double>(1.0, (*p.done)["steps"].get<double>());
      compute = (*p.done)["compute_s"].get<double>() * 1000 / steps;
      wait = (*p.done)["wait_s"].get<double>() * 1000 / steps;
      connect = std::max(connect, (*p.done)["connect_s"].get<double>());
      run = std::max(run, (*p.done)["epoch_s"].get<double>());
    }
    if (p.done && p.done->contains("pss_mb") && (*p.done)["pss_mb"].is_number()) {
      pssSum += (*p.done)["pss_mb"].get<double>();
    } else {
      pssEverywhere = false;
    }
    report.stepComputeMs.push_back(compute);
    report.stepWaitMs.push_back(wait);
    report.peakRssMb.push_back(result.ranks[r].peakRssMb);
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  report.timings = {{"total_s", total}, {"spawn_s", result.spawnSeconds},
                    {"connect_s", connect}, {"run_s", run}};
  if (result.firstFailure) {
    report.timings.push_back(
        {"stop_after_failure_s", result.allReapedSeconds - result.firstFailureSeconds});
  }
  const double maxRss = *std::max_element(report.peakRssMb.begin(), report.peakRssMb.end());
  const double meanRss = std::accumulate(report.peakRssMb.begin(), report.peakRssMb.end(), 0.0) /
                         static_cast<double>(report.peakRssMb.size());
  report.timings.push_back({"peak_rss_mb_max", maxRss});
  report.timings.push_back({"peak_rss_mb_mean", meanRss});
  // Only when every rank finished and could read its own: a partial sum would understate it.
  if (pssEverywhere) report.timings.push_back({"pss_mb_sum", pssSum});
  return report;
}

}  // namespace ddph::scenario
