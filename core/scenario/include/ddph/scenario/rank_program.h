#pragma once
// What one rank of `ddp-sim run` does: build the scenario's datasets, samplers and batching, run
// the epochs with a gradient allreduce per step, and write its audit trace (every batch with its
// sample ids, every collective). The run is judged over those traces after the ranks end
// (scenario_runner.h), by the audit's judge with the scenario's plan (NOTE [One judge]).
//
// NOTE [Step agreement]: each step's gradient allreduce carries a header of W floats, rank r's
// slot set to 1 when r has a batch for this step. Every rank keeps calling the allreduce (with an
// empty gradient) until the header sums to 0, so all ranks learn in the same collective when some
// ran out of batches while others did not: that step is a `collective-mismatch` (a real job would
// hang there), named with the ranks on each side, instead of a hang until the global timeout.
// Ending each epoch costs one extra allreduce whose header is all zeros. The ranks then stop; the
// run finds the same step over the trace, from the batches each rank's passes declared.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ddph/comm/communicator.h"
#include "ddph/scenario/scenario.h"
#include "ddph/sampler/property.h"

namespace ddph::scenario {

/// Callbacks from a running rank (called on the rank's thread).
class RankObserver {
 public:
  virtual ~RankObserver() = default;
  /// Before each step's work (epoch, step): the run's progress line.
  virtual void onStep(std::int64_t epoch, std::int64_t step) {}
};

struct RankRunStats {
  std::int64_t steps = 0;       ///< steps with a batch, all epochs
  double computeSeconds = 0;    ///< time between collectives (data + "compute")
  double waitSeconds = 0;       ///< time inside the gradient allreduces
  double epochSeconds = 0;      ///< wall time of the epochs
  /// The ranks disagreed on the number of steps and stopped (NOTE [Step agreement]).
  std::optional<sampler::Violation> stepMismatch;
  std::string traceFailure;  ///< why its trace stops short (a full disk), or empty
};

/// Where a rank writes its audit trace (docs/trace-format.md). `dir` empty: into $DDPH_AUDIT_DIR
/// when it is set (`ddp-sim launch --audit -- ddp-sim rank-run`), else nowhere.
struct RankTraceTarget {
  std::filesystem::path dir;
  std::string runId;  ///< the same on every rank of the run
};

/// Runs `scenario` as rank comm.rank() of comm.size(), writing its trace to `trace`. Injected kill faults raise SIGKILL in the
/// calling process: use only in a rank process. Collective failures propagate as TimeoutError /
/// ProtocolError.
RankRunStats runRankProgram(const Scenario& scenario, comm::Communicator& comm,
                            RankObserver& observer, const RankTraceTarget& trace = {});
RankRunStats runRankProgram(const Scenario& scenario, comm::Communicator& comm,
                            const RankTraceTarget& trace = {});

/// Eval metric stand-in: whether sample `id` of dataset `dataset` is "classified correctly"
/// (a fixed hash, about 70 % true), so metric skew from duplicates is exactly reproducible.
bool sampleCorrect(std::int64_t dataset, std::int64_t id);

}  // namespace ddph::scenario
