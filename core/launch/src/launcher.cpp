// launchRanks: the torchrun-style launcher, a thin user of the one rank supervisor (supervisor.h):
// here are the ranks' environment, the master port, the choice of spawner and the retry on a
// taken port.
#include "ddph/launch/launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>

#include "ddph/common/child_process.h"
#include "ddph/common/error.h"
#include "ddph/common/stop_signals.h"
#include "ddph/launch/python_program.h"
#include "ddph/launch/rank_spawner.h"
#include "supervisor.h"

namespace ddph::launch {

using common::ExitStatus;
using common::signalName;
using common::StopSignalScope;

namespace {

// Whether a rank's output line says `port` was in use when its store bound it (torch's TCPStore:
// "The server socket has failed to bind to [::]:40599 (errno: 98 - Address already in use)").
bool reportsPortTaken(const std::string& line, std::uint16_t port) {
  return line.find("Address already in use") != std::string::npos &&
         line.find(":" + std::to_string(port)) != std::string::npos;
}

// The variables only one rank has; every other one is the launch's common environment.
const std::vector<std::string> kPerRankVariables = {"RANK", "LOCAL_RANK"};

// Where rank 0's store listens: its node's address with emulated nodes, else masterAddr.
std::string masterAddressOf(const LaunchOptions& options) {
  return options.nodes ? nodeAddress(0) : options.masterAddr;
}

// The variables rank r has of its own (its node's, with emulated nodes).
EnvMap rankEnvironment(const LaunchOptions& options, int r) {
  if (options.nodes) return nodeRankEnvironment(*options.nodes, r);
  return EnvMap{{"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}};
}

std::vector<std::string> perRankVariables(const LaunchOptions& options) {
  return options.nodes ? nodeRankVariables(*options.nodes) : kPerRankVariables;
}

// What every rank's environment holds but its own variables (rankEnvironment).
EnvMap commonEnvironment(const LaunchOptions& options, std::uint16_t masterPort) {
  EnvMap env;
  for (const auto& [name, value] : options.extraEnv) env[name] = value;
  if (options.nodes) {
    for (auto& [name, value] : nodeCommonEnvironment(*options.nodes, ::getpid())) env[name] = value;
  } else {
    env["WORLD_SIZE"] = std::to_string(options.numRanks);
    env["LOCAL_WORLD_SIZE"] = std::to_string(options.numRanks);
    env["GROUP_RANK"] = "0";
  }
  env["TORCHELASTIC_RESTART_COUNT"] = "0";  // one attempt: never an inherited restart count
  env["TORCHELASTIC_MAX_RESTARTS"] = "0";
  env["MASTER_ADDR"] = masterAddressOf(options);
  env["MASTER_PORT"] = std::to_string(masterPort);
  return env;
}

// A fork server for a Python program when one was asked for and can fork; else exec'd ranks,
// with one line saying why when the program is Python.
std::unique_ptr<RankSpawner> chooseSpawner(const LaunchOptions& options, EnvMap common,
                                           const Supervisor& supervisor,
                                           std::string& hashDependence) {
  if (!options.forkServer.empty()) {
    const StopSignalScope& stopSignals = supervisor.stopSignals();
    std::string whyNot;
    if (const auto server = forkServerCommand(options.command, options.forkServer)) {
      whyNot = server->whyNot;
      if (whyNot.empty()) {
        auto ready = std::chrono::steady_clock::now() + options.forkServerReady;
        if (const auto deadline = supervisor.deadline()) ready = std::min(ready, *deadline);
        ForkServerStart start =
            startForkServer(server->argv, common, perRankVariables(options), ready, stopSignals.fd());
        if (start.spawner) return std::move(start.spawner);
        whyNot = start.whyNot;
        hashDependence = start.hashDependence;
      }
    }
    if (!whyNot.empty() && options.note && stopSignals.received() == 0) {
      options.note(fmt::format("each rank execs the program ({})", whyNot));
    }
  }
  return makeExecSpawner(options.command, std::move(common));
}

RankOutcome outcomeOf(const SupervisedRank& rank) {
  RankOutcome outcome;
  outcome.rank = rank.rank;
  outcome.pid = rank.pid;
  outcome.wasStopped = rank.wasStopped;
  if (!rank.end) return outcome;  // kRunning: never the case once the supervisor returned
  if (rank.hungAtExit && rank.endedByStop) {
    outcome.kind = RankOutcome::Kind::kHungAtExit;
    outcome.signal = rank.end->signal;
  } else if (rank.end->signal != 0) {
    outcome.kind = rank.endedByStop ? RankOutcome::Kind::kStopped : RankOutcome::Kind::kSignaled;
    outcome.signal = rank.end->signal;
  } else {
    outcome.kind = RankOutcome::Kind::kExited;
    outcome.code = rank.end->code;
  }
  return outcome;
}

// The rank whose failure stopped the world: the first failure, or at the timeout the first rank
// still running.
std::optional<RankOutcome> failureOf(const SupervisedWorld& world) {
  if (world.stopCause == StopCause::kFailure) {
    return outcomeOf(world.ranks[static_cast<std::size_t>(*world.firstFailure)]);
  }
  if (world.stopCause != StopCause::kDeadline) return std::nullopt;
  for (const auto& rank : world.ranks) {
    if (!rank.runningAtStop) continue;
    RankOutcome timedOut = outcomeOf(rank);
    timedOut.kind = RankOutcome::Kind::kTimedOut;
    timedOut.code = timedOut.signal = 0;
    return timedOut;
  }
  return std::nullopt;
}

void summarize(const LaunchOptions& options, int started, LaunchResult& result) {
  if (result.interruptedBy != 0) {
    result.exitCode = 128 + result.interruptedBy;
    result.summary = fmt::format("interrupted by {}: stopped all {} ranks",
                                 signalName(result.interruptedBy), started);
  } else if (result.failure) {
    result.exitCode = 1;
    const int others = started - 1;
    if (result.failure->kind == RankOutcome::Kind::kTimedOut) {
      result.summary =
          fmt::format("{} of {} s; stopped every rank", describeOutcome(*result.failure),
                      static_cast<double>(options.timeout->count()) / 1000.0);
    } else {
      result.summary =
          fmt::format("{}; stopped the other {} rank{}", describeOutcome(*result.failure), others,
                      others == 1 ? "" : "s");
    }
  } else {
    result.exitCode = 0;
    std::vector<std::string> hung;
    for (const auto& rank : result.ranks) {
      if (rank.kind == RankOutcome::Kind::kHungAtExit) hung.push_back(std::to_string(rank.rank));
    }
    result.summary =
        hung.empty()
            ? fmt::format("all {} ranks exited with code 0", started)
            : fmt::format("all {} ranks did their work; rank{} {} hung at exit (blocked "
                          "for {:g} s) and {} ended by the launcher",
                          started, hung.size() == 1 ? "" : "s", fmt::join(hung, ", "),
                          static_cast<double>(options.exitSettle.count()) / 1000.0,
                          hung.size() == 1 ? "was" : "were");
  }
}

// One run of the ranks on one master port.
LaunchResult launchOnce(const LaunchOptions& options) {
  LaunchResult result;
  result.masterPort =
      options.masterPort != 0 ? options.masterPort : findFreePort(masterAddressOf(options));
  SupervisorOptions supervision;
  supervision.worldSize = options.numRanks;
  supervision.timeout = options.timeout;
  supervision.grace = options.grace;
  supervision.rankEnvironment = [&options](int r) { return rankEnvironment(options, r); };
  supervision.out = options.out ? options.out : &std::cout;
  supervision.err = options.err ? options.err : &std::cerr;
  supervision.running = options.running;
  if (options.workDone) {
    supervision.workDone = [&options](int r, pid_t pid) { return options.workDone(r, pid); };
  }
  supervision.exitSettle = options.exitSettle;
  supervision.onLine = [&result](const std::string& line) {
    if (!result.portTaken && reportsPortTaken(line, result.masterPort)) result.portTaken = true;
  };
  Supervisor supervisor(std::move(supervision));
  const auto spawner =
      chooseSpawner(options, commonEnvironment(options, result.masterPort), supervisor,
                    result.hashDependence);
  const SupervisedWorld world = supervisor.run(*spawner);
  for (const auto& rank : world.ranks) {
    if (rank.pid != 0) result.ranks.push_back(outcomeOf(rank));
  }
  result.failure = failureOf(world);
  result.interruptedBy = world.interruptedBy;
  summarize(options, world.started(), result);
  return result;
}

}  // namespace

std::string describeOutcome(const RankOutcome& o) {
  const std::string who = fmt::format("rank {} (pid {})", o.rank, o.pid);
  switch (o.kind) {
    case RankOutcome::Kind::kRunning: return who + " is running";
    case RankOutcome::Kind::kExited: return fmt::format("{} exited with code {}", who, o.code);
    case RankOutcome::Kind::kSignaled:
      return fmt::format("{} {}", who, ExitStatus{0, o.signal}.describe());
    case RankOutcome::Kind::kTimedOut: return who + " was still running at the timeout";
    case RankOutcome::Kind::kStopped:
      return fmt::format("{} was stopped ({})", who, signalName(o.signal));
    case RankOutcome::Kind::kHungAtExit:
      return who + " hung at exit after its work and was ended by the launcher";
  }
  return who;
}

LaunchResult launchRanks(const LaunchOptions& options) {
  DDPH_CHECK(options.numRanks > 0, "the number of ranks must be positive, got {}",
             options.numRanks);
  DDPH_CHECK(!options.command.empty(), "no command to launch (ddp-sim launch -n W -- CMD ARGS…)");
  DDPH_CHECK(!options.nodes || options.nodes->worldSize() == options.numRanks,
             "{} nodes of {} ranks are not a world of {}", options.nodes ? options.nodes->nodes : 0,
             options.nodes ? options.nodes->perNode : 0, options.numRanks);
  LaunchResult result = launchOnce(options);
  if (!options.retryTakenPort || !result.portTaken || result.exitCode == 0 || result.interruptedBy != 0) {
    return result;
  }
  LaunchOptions again = options;
  again.retryTakenPort = false;
  do {
    again.masterPort = findFreePort(masterAddressOf(options));
  } while (again.masterPort == result.masterPort);
  if (options.note) {
    options.note(fmt::format("MASTER_PORT {} was taken before rank 0's store could bind it; running "
                             "the ranks once more on port {}",
                             result.masterPort, again.masterPort));
  }
  if (options.beforeRetry) options.beforeRetry();
  return launchOnce(again);
}

}  // namespace ddph::launch
