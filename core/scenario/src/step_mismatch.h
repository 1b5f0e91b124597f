#pragma once
// Private to the scenario library: the `collective-mismatch` a rank program finds while it runs
// (NOTE [Step agreement]), when some ranks ran out of batches while others still ran a step:
// what `ddp-sim rank-run` prints under an outside launcher. A run's trace is judged by the audit
// (NOTE [One judge]), which finds the same uneven steps there.

#include <cstdint>
#include <optional>
#include <vector>

#include "ddph/scenario/scenario.h"
#include "ddph/sampler/property.h"

namespace ddph::scenario {

/// How many of `world` ranks take `step` of `epoch`: all of them, or with a [resume] the resumed
/// world once the first `stepsBeforeStop` steps of epoch 0 are done.
int ranksTakingStep(const Scenario& s, int world, std::int64_t epoch, std::int64_t step,
                    std::int64_t stepsBeforeStop);

/// The step of `epoch` at which ranks with `plannedSteps[r]` steps each stop agreeing, as the
/// ranks find it at run time (the first step whose number of ranks with a batch is neither 0 nor
/// ranksTakingStep), or nothing when every rank ends the epoch in the same step. The violation
/// names the ranks on each side and every rank's step count.
std::optional<sampler::Violation> findStepMismatch(const Scenario& s, std::int64_t epoch,
                                                  const std::vector<std::int64_t>& plannedSteps,
                                                  std::int64_t stepsBeforeStop);

}  // namespace ddph::scenario
