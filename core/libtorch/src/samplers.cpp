// LibTorch's own distributed samplers, drained into index lists (ddph/sampler/libtorch_samplers.h).
#include <torch/data/samplers/distributed.h>

#include <algorithm>

#include "torch_parts.h"

namespace ddph::libtorch {

using sampler::Index;
using sampler::LibTorchSamplerKind;
using sampler::ShardRequest;

namespace {

template <typename TorchSampler>
std::vector<Index> drain(const ShardRequest& request, bool allowDuplicates) {
  TorchSampler sampler(static_cast<std::size_t>(request.datasetSize),
                       static_cast<std::size_t>(request.numReplicas),
                       static_cast<std::size_t>(request.rank), allowDuplicates);
  sampler.set_epoch(static_cast<std::size_t>(request.epoch));
  sampler.reset();
  std::vector<Index> out;
  const std::size_t batch = static_cast<std::size_t>(std::max<std::int64_t>(1, request.datasetSize));
  while (auto next = sampler.next(batch)) {
    if (next->empty()) break;
    out.insert(out.end(), next->begin(), next->end());
  }
  return out;
}

}  // namespace

std::vector<Index> libtorchSamplerIndices(LibTorchSamplerKind kind, bool allowDuplicates,
                                          const ShardRequest& request) {
  if (kind == LibTorchSamplerKind::kRandom) {
    return drain<torch::data::samplers::DistributedRandomSampler>(request, allowDuplicates);
  }
  return drain<torch::data::samplers::DistributedSequentialSampler>(request, allowDuplicates);
}

}  // namespace ddph::libtorch
