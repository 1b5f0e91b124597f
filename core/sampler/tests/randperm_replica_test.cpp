// The prefetching randperm replica (NOTE [Fast randperm]) against torch::randperm of the LibTorch
// the project is built against, over many sizes and seeds. The replica is what DistributedSampler
// uses below kRandpermReplicaLimit, so any drift here is a wrong shuffle everywhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "ddph/sampler/randperm.h"

namespace ddph::sampler {
namespace {

// Seeds as Python's manual_seed takes them (negatives wrap to uint64), with the edges of the
// low-32-bit truncation the mt19937 applies.
std::vector<std::uint64_t> testSeeds() {
  const std::vector<std::int64_t> signedSeeds = {
      0, 1, 42, 5489, -1, -2, -42, 2147483647, 2147483648LL, 4294967295LL, 4294967296LL,
      4294967297LL, -4294967296LL, std::numeric_limits<std::int64_t>::max(),
      std::numeric_limits<std::int64_t>::min()};
  std::vector<std::uint64_t> seeds;
  for (auto s : signedSeeds) seeds.push_back(static_cast<std::uint64_t>(s));
  seeds.push_back(std::numeric_limits<std::uint64_t>::max() - 3);  // Python accepts up to 2^64 - 1
  return seeds;
}

// Reports the first differing position instead of two unreadable 10^6-element vectors.
::testing::AssertionResult equalPermutations(const std::vector<Index>& expected,
                                             const std::vector<Index>& actual, std::int64_t n,
                                             std::uint64_t seed) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "n=" << n << " seed=" << seed << ": replica has "
                                         << actual.size() << " elements, LibTorch " << expected.size();
  }
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (actual[i] != expected[i]) {
      return ::testing::AssertionFailure()
             << "n=" << n << " seed=" << seed << ": first difference at position " << i
             << ": LibTorch " << expected[i] << ", replica " << actual[i];
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult samePermutation(std::int64_t n, std::uint64_t seed) {
  const auto expected = torchRandperm(n, seed, RandpermImpl::kLibTorch);
  if (static_cast<std::int64_t>(expected.size()) != n) {
    return ::testing::AssertionFailure() << "torch::randperm(" << n << ") has " << expected.size()
                                         << " elements";
  }
  return equalPermutations(expected, torchRandperm(n, seed, RandpermImpl::kReplica), n, seed);
}

TEST(RandpermReplica, SmallSizesEverySeed) {
  // Every n up to past the replica's look-ahead window (32 draws), where its ring buffer wraps.
  for (std::uint64_t seed : testSeeds()) {
    for (std::int64_t n = 0; n <= 130; ++n) {
      ASSERT_TRUE(samePermutation(n, seed));
    }
  }
}

TEST(RandpermReplica, PowersOfTwoAndNeighbours) {
  for (int k = 7; k <= 20; ++k) {
    for (std::int64_t d : {-1, 0, 1}) {
      for (std::uint64_t seed : {std::uint64_t{0}, static_cast<std::uint64_t>(-7)}) {
        ASSERT_TRUE(samePermutation((std::int64_t{1} << k) + d, seed));
      }
    }
  }
}

TEST(RandpermReplica, LargeSizes) {
  for (std::uint64_t seed : testSeeds()) {
    ASSERT_TRUE(samePermutation(100000, seed));
  }
  for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{1}, static_cast<std::uint64_t>(-1)}) {
    ASSERT_TRUE(samePermutation(1000000, seed));
  }
  ASSERT_TRUE(samePermutation(10000000, 12345));
}

TEST(RandpermReplica, RandomSizesAndSeeds) {
  // A fixed engine seed keeps the test reproducible; the figures are printed on failure.
  std::mt19937_64 rng(20261129);
  std::uniform_int_distribution<std::int64_t> size(0, 300000);
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(samePermutation(size(rng), rng()));
  }
}

TEST(RandpermReplica, AutoUsesAnImplementationThatMatches) {
  for (std::int64_t n : {0, 1, 2, 1000, 99999}) {
    EXPECT_EQ(torchRandperm(n, 3, RandpermImpl::kAuto), torchRandperm(n, 3, RandpermImpl::kLibTorch))
        << "n=" << n;
  }
}

// The comparison must be able to fail: a replica one seed off, or one element off, is caught.
TEST(RandpermReplica, ComparisonDetectsADifferentPermutation) {
  const auto expected = torchRandperm(1000, 1, RandpermImpl::kLibTorch);
  EXPECT_FALSE(equalPermutations(expected, torchRandperm(1000, 2, RandpermImpl::kReplica), 1000, 1));
  auto swapped = torchRandperm(1000, 1, RandpermImpl::kReplica);
  std::swap(swapped[998], swapped[999]);
  EXPECT_FALSE(equalPermutations(expected, swapped, 1000, 1));
  swapped.pop_back();
  EXPECT_FALSE(equalPermutations(expected, swapped, 1000, 1));
  // The mt19937 takes the low 32 bits of the seed: seeds 2^32 apart give one permutation.
  EXPECT_TRUE(equalPermutations(expected,
                                torchRandperm(1000, 1 + (std::uint64_t{1} << 32),
                                              RandpermImpl::kReplica), 1000, 1));
}

}  // namespace
}  // namespace ddph::sampler
