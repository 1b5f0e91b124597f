#pragma once
// Private to the scenario library: facts about a pipeline's configuration that explain a
// violation, as a user would work them out by hand from the sampler and DataLoader settings.
// Each names the dataset and the property it explains, and becomes the likely cause of the
// violations of that property on that dataset (and nothing else: a configuration that explains
// one finding says nothing about another).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/scenario/scenario.h"

namespace ddph::scenario {

struct PipelineHint {
  std::string dataset;   ///< the dataset whose violations it explains
  std::string property;  ///< the property it explains
  std::string cause;     ///< why, from the configuration
  std::string help;      ///< the remedy
};

/// `datasets[d]` yields `batchesPerRank[d]` batches per rank per epoch, at world size `world`.
std::vector<PipelineHint> pipelineHints(const Scenario& s, const std::vector<DatasetSpec>& datasets,
                                        const std::vector<std::size_t>& batchesPerRank,
                                        std::int64_t world);

}  // namespace ddph::scenario
