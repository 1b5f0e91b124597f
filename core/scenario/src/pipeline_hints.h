#pragma once
// Private to the scenario library: facts about a pipeline's configuration that explain a
// violation, as a user would work them out by hand from the sampler and DataLoader settings
// (shown as notes beside rank 0's findings).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ddph/scenario/scenario.h"

namespace ddph {

/// `datasets[d]` yields `batchesPerRank[d]` batches per rank per epoch, at world size `world`.
std::vector<std::string> pipelineHints(const Scenario& s, const std::vector<DatasetSpec>& datasets,
                                       const std::vector<std::size_t>& batchesPerRank,
                                       std::int64_t world);

}  // namespace ddph
