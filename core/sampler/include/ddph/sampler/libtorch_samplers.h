#pragma once
// LibTorch's own C++ distributed samplers (torch::data::samplers::DistributedRandomSampler and
// DistributedSequentialSampler) behind the Sampler interface, so the property suite can judge
// them. LibTorch's samplers take no seed (the random one seeds std::mt19937 with the epoch alone)
// and declare no length; the request's seed is ignored, as it would be in a user's program.

#include <cstdint>
#include <string>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

enum class LibTorchSamplerKind { kRandom, kSequential };

class LibTorchSampler final : public Sampler {
 public:
  /// `allowDuplicates` is LibTorch's own flag (true by default there): pad every rank to
  /// ceil(N / W) samples, or cut every rank to floor(N / W).
  explicit LibTorchSampler(LibTorchSamplerKind kind, bool allowDuplicates = true);

  std::string name() const override;
  std::vector<Index> indices(const ShardRequest& request) override;

 private:
  LibTorchSamplerKind kind_;
  bool allowDuplicates_;
};

}  // namespace ddph::sampler
