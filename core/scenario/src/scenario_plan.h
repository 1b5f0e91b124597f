#pragma once
// Private to the scenario library: what a scenario's plan knows of its run beyond the trace, as
// the one judge's planned run (ddph/audit/planned_run.h, NOTE [One judge]): per epoch that
// every rank completed, the epoch checks (epoch_checks.h) over the ids each rank's batches carry,
// judged by the samplers' contracts, with the causes the pipeline's configuration gives
// (pipeline_hints.h); the stop and resume the scenario emulated; a straggler when every rank ran
// to its end. The audit judges the trace itself (uneven steps included).

#include "ddph/audit/planned_run.h"
#include "ddph/scenario/scenario.h"
#include "ddph/trace/trace.h"

namespace ddph::scenario {

/// Throws ConfigError when the trace is not one of `s` (its loaders are not the scenario's
/// datasets).
audit::PlannedRun planOf(const Scenario& s, const trace::Trace& trace);

}  // namespace ddph::scenario
