#pragma once
// Private to the scenario library: the `straggler` property over every rank's per-step times.

#include <cstdint>
#include <optional>
#include <vector>

#include "ddph/verify/property.h"

namespace ddph {

/// `all[r]` = {rank r's compute, its wait in collectives}, microseconds per step. A straggler
/// computes over 3x the median, at least 5 ms more, and the excess is over a quarter of the
/// median step.
std::optional<Violation> findStragglers(const std::vector<std::vector<std::int64_t>>& all);

}  // namespace ddph
