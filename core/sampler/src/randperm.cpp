#include "ddph/sampler/randperm.h"

#include <algorithm>
#include <array>

#include <boost/iterator/counting_iterator.hpp>
#include <random>
#include <utility>

#include "ddph/common/error.h"
#include "ddph/common/huge_pages.h"
#include "ddph/common/libtorch_module.h"

namespace ddph::sampler {

using common::adviseHugePages;

namespace {

// See NOTE [Fast randperm].
void replicaRandperm(Index* r, std::int64_t n, std::uint64_t seed) {
  if (n < 2) return;
  // LibTorch's CPU generator is the standard MT19937 seeded with the seed's low 32 bits.
  std::mt19937 engine(static_cast<std::uint32_t>(seed));
  // The swap target of step j: j + (32-bit draw % (n - j)). The modulo is done in 32 bits where
  // the span fits, which gives the same value as LibTorch's 64-bit modulo and is cheaper.
  auto target = [&](std::int64_t j) -> std::int64_t {
    const std::uint32_t draw = engine();
    const auto span = static_cast<std::uint64_t>(n - j);
    const std::uint64_t offset = span <= 0xffffffffULL
                                     ? static_cast<std::uint32_t>(draw % static_cast<std::uint32_t>(span))
                                     : draw % span;
    return j + static_cast<std::int64_t>(offset);
  };
  constexpr std::int64_t kAhead = 32;  // steps drawn ahead; a power of two
  std::array<std::int64_t, kAhead> ring{};
  const std::int64_t swaps = n - 1;
  for (std::int64_t j = 0; j < std::min(kAhead, swaps); ++j) {
    ring[j] = target(j);
    __builtin_prefetch(r + ring[j], 1);
  }
  for (std::int64_t i = 0; i < swaps; ++i) {
    const std::int64_t z = ring[i & (kAhead - 1)];
    const std::int64_t j = i + kAhead;
    if (j < swaps) {
      const std::int64_t next = target(j);
      ring[j & (kAhead - 1)] = next;
      __builtin_prefetch(r + next, 1);
    }
    std::swap(r[i], r[z]);
  }
}

}  // namespace

std::vector<Index> torchRandperm(std::int64_t n, std::uint64_t seed, RandpermImpl impl) {
  DDPH_CHECK(n >= 0, "randperm size must be non-negative, got {}", n);
  if (impl == RandpermImpl::kLibTorch ||
      (impl == RandpermImpl::kAuto && n >= kRandpermReplicaLimit)) {
    return libtorch::backend().randperm(n, seed);
  }
  std::vector<Index> r;
  r.reserve(static_cast<std::size_t>(n));
  adviseHugePages(r.data(), r.capacity() * sizeof(Index));
  r.assign(boost::counting_iterator<Index>(0), boost::counting_iterator<Index>(n));
  replicaRandperm(r.data(), n, seed);
  return r;
}

}  // namespace ddph::sampler
