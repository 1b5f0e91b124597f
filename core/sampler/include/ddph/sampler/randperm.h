#pragma once
// torch.randperm on a CPU generator, bit for bit.
//
// NOTE [Fast randperm]
// LibTorch's CPU randperm fills 0..n-1 and runs Fisher-Yates forwards: for i in [0, n-1) it swaps
// r[i] with r[i + (g.random() % (n - i))], where g.random() is the next 32-bit output of the
// generator's mt19937 (seeded with the low 32 bits of the seed). Each swap touches a random slot
// of an n-element array, so for large n it is bound by cache misses. The mt19937 stream does not
// depend on the array, so the replica draws the swap targets a few dozen steps ahead and prefetches
// them: same swaps, same order, same result, about 5x faster at n = 10^7 on the development machine.
// LibTorch 2.x switched to a different algorithm for n >= 2^32 / 20; below that bound every
// version we know uses the loop above, and `kAuto` only uses the replica there. The property suite
// compares the replica with torch::randperm of the LibTorch the project is built against.

#include <cstdint>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

enum class RandpermImpl {
  kAuto,      ///< the replica where it is known to match, torch::randperm elsewhere
  kLibTorch,  ///< torch::randperm itself
  kReplica,   ///< the prefetching replica of NOTE [Fast randperm]
};

/// Largest n (exclusive) for which kAuto uses the replica.
inline constexpr std::int64_t kRandpermReplicaLimit = 4294967295LL / 20;

/// The permutation `torch.randperm(n, generator=g)` returns after `g.manual_seed(seed)`.
/// `seed` is taken as Python's manual_seed takes an int: negative values wrap to uint64.
std::vector<Index> torchRandperm(std::int64_t n, std::uint64_t seed,
                                 RandpermImpl impl = RandpermImpl::kAuto);

}  // namespace ddph::sampler
