#include "ddph/data/dataset_mix.h"

#include <algorithm>

#include "ddph/common/error.h"
#include "ddph/sampler/batching.h"

namespace ddph::data {

using common::ConfigError;
using common::Error;
using sampler::Index;
using sampler::makeBatches;

Mix parseMix(std::string_view name) {
  if (name == "zip") return Mix::kZip;
  if (name == "cycle") return Mix::kCycle;
  if (name == "concat") return Mix::kConcat;
  throw ConfigError(
      fmt::format("unknown dataset mix '{}': expected one of zip, cycle, concat", name));
}

std::string mixName(Mix mix) {
  switch (mix) {
    case Mix::kZip:
      return "zip";
    case Mix::kCycle:
      return "cycle";
    case Mix::kConcat:
      return "concat";
  }
  DDPH_ASSERT(false);
  return {};
}

std::vector<MixedStep> planEpoch(const std::vector<std::vector<Index>>& shards,
                                 std::int64_t batchSize, Mix mix) {
  DDPH_CHECK(batchSize > 0, "batch size must be positive, got {}", batchSize);
  const std::size_t numDatasets = shards.size();
  std::vector<std::vector<std::vector<Index>>> batches;  // [dataset][batch]
  batches.reserve(numDatasets);
  for (const auto& shard : shards) batches.push_back(makeBatches(shard, {batchSize, false}));

  std::vector<MixedStep> steps;
  if (numDatasets == 0) return steps;
  auto emptyStep = [&] {
    MixedStep step;
    step.batches.resize(numDatasets);
    return step;
  };
  switch (mix) {
    case Mix::kZip: {
      std::size_t count = batches[0].size();
      for (const auto& b : batches) count = std::min(count, b.size());
      for (std::size_t s = 0; s < count; ++s) {
        MixedStep step = emptyStep();
        for (std::size_t d = 0; d < numDatasets; ++d) step.batches[d] = batches[d][s];
        steps.push_back(std::move(step));
      }
      break;
    }
    case Mix::kCycle: {
      std::size_t count = 0;
      for (const auto& b : batches) count = std::max(count, b.size());
      for (std::size_t s = 0; s < count; ++s) {
        MixedStep step = emptyStep();
        // A dataset with an empty shard has nothing to cycle over and takes no part.
        for (std::size_t d = 0; d < numDatasets; ++d) {
          if (!batches[d].empty()) step.batches[d] = batches[d][s % batches[d].size()];
        }
        steps.push_back(std::move(step));
      }
      break;
    }
    case Mix::kConcat:
      for (std::size_t d = 0; d < numDatasets; ++d) {
        for (auto& batch : batches[d]) {
          MixedStep step = emptyStep();
          step.batches[d] = std::move(batch);
          steps.push_back(std::move(step));
        }
      }
      break;
  }
  return steps;
}

VisitCounter::VisitCounter(std::int64_t datasetSize) {
  DDPH_CHECK(datasetSize >= 0, "dataset size must be non-negative, got {}", datasetSize);
  counts_.assign(static_cast<std::size_t>(datasetSize), 0);
}

void VisitCounter::visit(const std::vector<Index>& batch) {
  const auto size = static_cast<Index>(counts_.size());
  for (const Index i : batch) {
    if (i < 0 || i >= size) {
      throw Error(fmt::format("visited sample index {} outside the dataset [0, {})", i, size));
    }
  }
  for (const Index i : batch) ++counts_[static_cast<std::size_t>(i)];
}

void VisitCounter::reset() { std::fill(counts_.begin(), counts_.end(), 0); }

VisitSummary summarize(const std::vector<std::int64_t>& counts) {
  VisitSummary s;
  s.datasetSize = static_cast<std::int64_t>(counts.size());
  for (const std::int64_t c : counts) {
    s.visits += c;
    if (c > 0) ++s.seen;
    if (c > 1) ++s.seenMoreThanOnce;
  }
  s.neverSeen = s.datasetSize - s.seen;
  return s;
}

}  // namespace ddph::data
