#pragma once
// Private to the scenario library: the `straggler` property, a check of `ddp-sim run` over its
// ranks' trace (their step times, ddph/audit/step_times.h). Not one of the audit's checks: a real
// program's rank 0 that logs or saves checkpoints is slower by design, and the audit judges
// correctness (docs/ddp-sim.md).

#include <optional>

#include "ddph/trace/trace.h"
#include "ddph/sampler/property.h"

namespace ddph::scenario {

/// A straggler computes over 3x the median rank, at least 5 ms more per step, and the excess is
/// over a quarter of the median step. Nothing when a rank's step times are unknown.
std::optional<sampler::Violation> findStragglers(const trace::Trace& trace);

}  // namespace ddph::scenario
