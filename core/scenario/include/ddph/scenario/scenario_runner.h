#pragma once
// `ddp-sim run`: a scenario on W real rank processes (forked, a local store served by rank 0,
// Gloo with one loopback address per rank), supervised, and turned into a RunReport.

#include <optional>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/scenario/rank_program.h"
#include "ddph/scenario/run_progress.h"
#include "ddph/scenario/run_report.h"
#include "ddph/scenario/scenario.h"

namespace ddph::scenario {

struct RunOptions {
  std::optional<int> worldSize;   ///< overrides the scenario's world_size
  std::optional<double> deadlineS;  ///< the whole run (default: generous, from the scenario)
  double graceS = 2.0;            ///< SIGTERM → SIGKILL when stopping ranks
  comm::GlooOptions gloo;         ///< the engine and wait mode (timeout and address: per rank)
  /// Where the ranks say they joined and which epoch they are in (for a progress line); its world
  /// size must be the run's. Null: nowhere.
  RunProgress* progress = nullptr;
  /// Where the ranks write their audit trace (required: `ddp-sim run`'s --trace-dir, or a private
  /// folder); the run's rank failures are judged on it.
  RankTraceTarget trace;
};

/// Runs the scenario. Violations (including rank-failure) are in the report; throws ConfigError
/// for an invalid scenario / world size before anything runs.
RunReport runScenario(Scenario scenario, const RunOptions& options);

}  // namespace ddph::scenario
