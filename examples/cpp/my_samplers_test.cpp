// Two user samplers, written against ddph::sampler::Sampler, each checked against the contract it
// promises in one call. Nothing here needs LibTorch.
#include <ddph/sampler/sampler.h>
#include <ddph/verify/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace {

// A training sampler with DistributedSampler's contract but its own shuffle (std::mt19937_64
// seeded with seed + epoch, not torch.randperm): pad with the head of the order, then stride.
class MyShuffleSampler : public ddph::sampler::Sampler {
 public:
  std::string name() const override { return "my-shuffle"; }
  std::vector<ddph::sampler::Index> indices(const ddph::sampler::ShardRequest& r) override {
    std::vector<ddph::sampler::Index> order(static_cast<std::size_t>(r.datasetSize));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 gen(static_cast<std::uint64_t>(r.seed + r.epoch));
    std::shuffle(order.begin(), order.end(), gen);
    const std::int64_t perRank = (r.datasetSize + r.numReplicas - 1) / r.numReplicas;
    std::vector<ddph::sampler::Index> shard;
    for (std::int64_t k = 0; k < perRank; ++k) {
      const std::int64_t pos = k * r.numReplicas + r.rank;
      shard.push_back(order[static_cast<std::size_t>(pos % r.datasetSize)]);
    }
    return shard;
  }
};

// An evaluation sampler: contiguous blocks, the N % W leftovers one each to the first ranks.
class MyEvalSampler : public ddph::sampler::Sampler {
 public:
  std::string name() const override { return "my-eval"; }
  std::vector<ddph::sampler::Index> indices(const ddph::sampler::ShardRequest& r) override {
    const std::int64_t base = r.datasetSize / r.numReplicas;
    const std::int64_t extra = r.datasetSize % r.numReplicas;
    const std::int64_t begin = r.rank * base + std::min(r.rank, extra);
    const std::int64_t length = base + (r.rank < extra ? 1 : 0);
    std::vector<ddph::sampler::Index> shard(static_cast<std::size_t>(length));
    std::iota(shard.begin(), shard.end(), begin);
    return shard;
  }
};

TEST(MySamplers, ShuffleSamplerKeepsPyTorchsContract) {
  MyShuffleSampler sampler;
  EXPECT_TRUE(ddph::verify::testing::satisfiesContract(sampler, "pytorch"));
}

TEST(MySamplers, EvalSamplerScoresEverySampleOnce) {
  MyEvalSampler sampler;
  EXPECT_TRUE(ddph::verify::testing::satisfiesContract(sampler, "exactly-once"));
  // It is not a training sampler: uneven shards would hang DDP (shown with the minimal case).
  const auto verdict = ddph::verify::testing::satisfiesContract(sampler, "pytorch");
  EXPECT_FALSE(verdict);
  EXPECT_NE(std::string(verdict.message()).find("FAIL equal-length    minimal case N=1 W=2"),
            std::string::npos)
      << verdict.message();
}

TEST(MySamplers, ComposedContract) {
  MyEvalSampler sampler;
  const ddph::verify::Contract inOrder{"in-order-eval",
                                       "evaluation in dataset order",
                                       {"valid-range", "no-duplicates", "coverage"},
                                       ddph::sampler::Expectations{}};
  EXPECT_TRUE(ddph::verify::testing::satisfiesContract(sampler, inOrder));
}

}  // namespace
