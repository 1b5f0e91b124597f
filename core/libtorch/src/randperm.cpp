// torch::randperm itself (RandpermImpl::kLibTorch, and kAuto beyond the replica's bound).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "ddph/common/error.h"
#include "torch_parts.h"

namespace ddph::libtorch {

using sampler::Index;

// torch::randperm writes straight into the returned vector (a tensor over its memory), so the
// permutation exists once: returning a copy of a tensor would hold two permutations of n at the
// peak (1.6 GB at n = 10^8).
std::vector<Index> libtorchRandperm(std::int64_t n, std::uint64_t seed) {
  std::vector<Index> r(static_cast<std::size_t>(n));
  if (n == 0) return r;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor view = at::from_blob(r.data(), {n}, at::TensorOptions().dtype(at::kLong));
  at::randperm_out(view, n, gen);
  DDPH_ASSERT(view.data_ptr<std::int64_t>() == r.data());  // written in place, not reallocated
  return r;
}

}  // namespace ddph::libtorch
