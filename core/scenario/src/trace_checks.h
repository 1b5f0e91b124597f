#pragma once
// Private to the scenario library: the scenario's own checks of a `ddp-sim run`, judged over the
// run's trace (docs/trace-format.md) as the audit judges a real program's: per epoch that every
// rank began, the step agreement (NOTE [Step agreement], step_mismatch.h); per epoch that every
// rank completed, the epoch checks (epoch_checks.h) over the ids each rank's batches carry.

#include "ddph/trace/trace.h"
#include "ddph/scenario/scenario.h"
#include "epoch_checks.h"

namespace ddph::scenario {

/// Throws ConfigError when the trace is not one of `s` (its loaders are not the scenario's
/// datasets).
Findings checkRunTrace(const Scenario& s, const trace::Trace& trace);

}  // namespace ddph::scenario
