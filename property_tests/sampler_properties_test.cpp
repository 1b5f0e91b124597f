// The property suite on the PyTorch port: every property holds for every generated configuration.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "ddph/verify/case_gen.h"
#include "ddph/common/error.h"
#include "ddph/sampler/sampler_checks.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::sampler {

using common::ConfigError;

namespace {

// Checks one property of DistributedSampler on a generated case, both shuffle and drop_last
// settings generated too. RC_ASSERT prints the violation; RapidCheck shrinks the case.
void holdsForPytorchPort(std::string_view property) {
  const auto c = *rc::gen::arbitrary<SamplerCase>().as("case");
  const bool shuffle = *rc::gen::arbitrary<bool>().as("shuffle");
  const bool dropLast = *rc::gen::arbitrary<bool>().as("drop_last");
  DistributedSamplerOptions options;
  options.shuffle = shuffle;
  options.dropLast = dropLast;
  DistributedSampler sampler(options);
  Expectations e;
  e.shuffle = shuffle;
  e.dropLast = dropLast;
  const auto found = checkSampler(sampler, c, e, {std::string(property)});
  RC_ASSERT(found.empty());
}

RC_GTEST_PROP(DistributedSamplerProperties, validRange, ()) { holdsForPytorchPort(property::kValidRange); }
RC_GTEST_PROP(DistributedSamplerProperties, equalLength, ()) { holdsForPytorchPort(property::kEqualLength); }
RC_GTEST_PROP(DistributedSamplerProperties, coverage, ()) { holdsForPytorchPort(property::kCoverage); }
RC_GTEST_PROP(DistributedSamplerProperties, disjointness, ()) { holdsForPytorchPort(property::kDisjointness); }
RC_GTEST_PROP(DistributedSamplerProperties, padding, ()) { holdsForPytorchPort(property::kPadding); }
RC_GTEST_PROP(DistributedSamplerProperties, reshuffle, ()) { holdsForPytorchPort(property::kReshuffle); }
RC_GTEST_PROP(DistributedSamplerProperties, determinism, ()) { holdsForPytorchPort(property::kDeterminism); }
RC_GTEST_PROP(DistributedSamplerProperties, seedPlusEpoch, ()) { holdsForPytorchPort(property::kSeedPlusEpoch); }

// One rank's indices() and the all-rank partition() (one shared order) agree.
RC_GTEST_PROP(DistributedSamplerProperties, rankShardMatchesPartition, ()) {
  const auto c = *rc::gen::arbitrary<SamplerCase>().as("case");
  const bool dropLast = *rc::gen::arbitrary<bool>().as("drop_last");
  DistributedSamplerOptions options;
  options.dropLast = dropLast;
  DistributedSampler sampler(options);
  const Partition p = sampler.partition(c);
  const auto rank = *rc::gen::inRange<std::int64_t>(0, c.numReplicas).as("rank");
  RC_ASSERT(sampler.indices(c.forRank(rank)) == p.ranks[rank]);
}

// PyTorch's num_samples formula, from its Python definition with float ceil.
RC_GTEST_PROP(DistributedSamplerProperties, numSamplesMatchesPythonFormula, ()) {
  const auto c = *rc::gen::arbitrary<SamplerCase>().as("case");
  const double n = static_cast<double>(c.datasetSize), w = static_cast<double>(c.numReplicas);
  const bool uneven = c.datasetSize % c.numReplicas != 0;
  RC_ASSERT(distributedNumSamples(c.datasetSize, c.numReplicas, true) ==
            static_cast<std::int64_t>(uneven ? std::ceil((n - w) / w) : std::ceil(n / w)));
  RC_ASSERT(distributedNumSamples(c.datasetSize, c.numReplicas, false) ==
            static_cast<std::int64_t>(std::ceil(n / w)));
}

TEST(DistributedSamplerErrors, rejectsBadRequestsWithClearMessages) {
  DistributedSampler sampler;
  auto message = [&](ShardRequest r) {
    try {
      sampler.indices(r);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({10, 4, 4, 0, 0}), "Invalid rank 4, rank should be in the interval [0, 3]");
  EXPECT_EQ(message({10, 4, -1, 0, 0}), "Invalid rank -1, rank should be in the interval [0, 3]");
  EXPECT_EQ(message({10, 0, 0, 0, 0}), "num_replicas must be positive, got 0");
  EXPECT_EQ(message({10, -3, 0, 0, 0}), "num_replicas must be positive, got -3");
  EXPECT_EQ(message({-1, 2, 0, 0, 0}), "dataset size must be non-negative, got -1");
  EXPECT_THROW(sampler.partition({10, 0, 0, 0}), ConfigError);
}

TEST(DistributedSamplerEdges, emptyDatasetAndMoreRanksThanSamples) {
  DistributedSampler sampler;
  const Partition empty = sampler.partition({0, 4, 0, 0});
  for (const auto& shard : empty.ranks) EXPECT_TRUE(shard.empty());
  // N = 3 on W = 8: every rank gets one index; five of them are padding, tiled from the head.
  DistributedSampler sequential({/*shuffle=*/false, /*dropLast=*/false});
  const Partition tiny = sequential.partition({3, 8, 0, 0});
  std::vector<Index> got;
  for (const auto& shard : tiny.ranks) {
    ASSERT_EQ(shard.size(), 1u);
    got.push_back(shard[0]);
  }
  EXPECT_EQ(got, (std::vector<Index>{0, 1, 2, 0, 1, 2, 0, 1}));
  // With drop_last every rank gets nothing.
  DistributedSampler dropping({/*shuffle=*/true, /*dropLast=*/true});
  for (const auto& shard : dropping.partition({3, 8, 0, 0}).ranks) EXPECT_TRUE(shard.empty());
}

}  // namespace
}  // namespace ddph::sampler
