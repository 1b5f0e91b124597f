// The fast randperm replica (NOTE [Fast randperm]) against LibTorch's own randperm.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "ddph/sampler/randperm.h"

namespace ddph::sampler {
namespace {

RC_GTEST_PROP(Randperm, replicaMatchesLibTorch, ()) {
  const auto n = *rc::gen::oneOf(rc::gen::inRange<std::int64_t>(0, 70),
                                 rc::gen::inRange<std::int64_t>(0, 200000))
                      .as("n");
  const auto seed = *rc::gen::arbitrary<std::uint64_t>().as("seed");
  RC_ASSERT(torchRandperm(n, seed, RandpermImpl::kReplica) ==
            torchRandperm(n, seed, RandpermImpl::kLibTorch));
}

TEST(Randperm, replicaMatchesLibTorchAtLargeN) {
  for (std::int64_t n : {1000003LL, 3000000LL}) {
    EXPECT_EQ(torchRandperm(n, 7, RandpermImpl::kReplica), torchRandperm(n, 7, RandpermImpl::kLibTorch))
        << "n=" << n;
  }
}

TEST(Randperm, seedsWrapLikePythonManualSeed) {
  // Python: g.manual_seed(-1) seeds with 2^64 - 1.
  EXPECT_EQ(torchRandperm(50, static_cast<std::uint64_t>(-1)),
            torchRandperm(50, 18446744073709551615ULL, RandpermImpl::kLibTorch));
}

}  // namespace
}  // namespace ddph::sampler
