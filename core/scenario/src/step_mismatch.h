#pragma once
// Private to the scenario library: the `collective-mismatch` violation of NOTE [Step agreement],
// when some ranks ran out of batches while others still ran a step.

#include <cstdint>
#include <vector>

#include "ddph/verify/property.h"

namespace ddph::scenario {

/// `hasBatch[r]`: whether rank r had a batch for `step`; `stepsPerRank[r]` = {rank r's planned
/// steps}. The violation names the ranks on each side and every rank's step count.
verify::Violation describeStepMismatch(const std::vector<bool>& hasBatch, std::int64_t epoch,
                                       std::int64_t step,
                                       const std::vector<std::vector<std::int64_t>>& stepsPerRank);

}  // namespace ddph::scenario
