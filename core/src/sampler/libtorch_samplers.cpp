// One of the few translation units that include LibTorch headers.
#include "ddph/sampler/libtorch_samplers.h"

#include <torch/data/samplers/distributed.h>

#include <algorithm>
#include <memory>

#include "ddph/common/error.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph {
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
  if (kind_ == LibTorchSamplerKind::kRandom) {
    return drain<torch::data::samplers::DistributedRandomSampler>(request, allowDuplicates_);
  }
  return drain<torch::data::samplers::DistributedSequentialSampler>(request, allowDuplicates_);
}

}  // namespace ddph
