// DataLoader-style batching: concatenated batches give back the indices; sizes follow drop_last.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "ddph/common/error.h"
#include "ddph/sampler/batching.h"

namespace ddph::sampler {

using common::ConfigError;

namespace {

RC_GTEST_PROP(Batching, batchesPartitionTheIndicesInOrder, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(0, 500).as("indices");
  const auto b = *rc::gen::inRange<std::int64_t>(1, 70).as("batch size");
  const bool dropLast = *rc::gen::arbitrary<bool>().as("drop_last");
  std::vector<Index> indices(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) indices[i] = 3 * i + 1;
  const auto batches = makeBatches(indices, {b, dropLast});
  RC_ASSERT(static_cast<std::int64_t>(batches.size()) == numBatches(n, {b, dropLast}));
  std::vector<Index> joined;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    if (k + 1 < batches.size() || dropLast) RC_ASSERT(static_cast<std::int64_t>(batches[k].size()) == b);
    RC_ASSERT(!batches[k].empty());
    joined.insert(joined.end(), batches[k].begin(), batches[k].end());
  }
  const std::int64_t kept = dropLast ? n / b * b : n;
  RC_ASSERT(joined == std::vector<Index>(indices.begin(), indices.begin() + kept));
}

TEST(Batching, rejectsNonPositiveBatchSize) {
  EXPECT_THROW(numBatches(10, {0, false}), ConfigError);
}

}  // namespace
}  // namespace ddph::sampler
