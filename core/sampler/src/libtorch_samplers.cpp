// LibTorch's samplers run in the on-demand LibTorch library (libtorch/samplers.cpp).
#include "ddph/sampler/libtorch_samplers.h"

#include "ddph/common/error.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/common/libtorch_module.h"

namespace ddph::sampler {

LibTorchSampler::LibTorchSampler(LibTorchSamplerKind kind, bool allowDuplicates)
    : kind_(kind), allowDuplicates_(allowDuplicates) {}

std::string LibTorchSampler::name() const {
  std::string name = kind_ == LibTorchSamplerKind::kRandom ? "libtorch-random" : "libtorch-sequential";
  if (!allowDuplicates_) name += " (allow_duplicates=false)";
  return name;
}

std::vector<Index> LibTorchSampler::indices(const ShardRequest& request) {
  validateShardRequest(request);
  DDPH_CHECK(request.epoch >= 0, "LibTorch's samplers take an unsigned epoch, got {}", request.epoch);
  return libtorch::backend().samplerIndices(kind_, allowDuplicates_, request);
}

}  // namespace ddph::sampler
