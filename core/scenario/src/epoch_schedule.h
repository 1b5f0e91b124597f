#pragma once
// Private to the scenario library: which batch of which dataset each step of an epoch draws, for
// the scenario's way of combining datasets (zip, concat, cycle, weighted).

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ddph/scenario/scenario.h"

namespace ddph::scenario {

/// Per step, the (dataset, batch) pairs it draws.
using Schedule = std::vector<std::vector<std::pair<std::size_t, std::size_t>>>;

/// `counts[d]`: dataset d's batches this epoch on this rank. The weighted mix draws from a
/// generator seeded by (seed, epoch), the same on every rank.
Schedule epochSchedule(const Scenario& s, const std::vector<std::size_t>& counts,
                       std::int64_t epoch);

}  // namespace ddph::scenario
