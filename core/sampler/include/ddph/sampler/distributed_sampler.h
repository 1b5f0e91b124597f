#pragma once
// DistributedSampler: a bit-exact port of torch.utils.data.DistributedSampler (torch 1.13).
//
// NOTE [PyTorch DistributedSampler]
// For a dataset of N samples on W replicas, PyTorch computes
//   num_samples = floor(N / W)   if drop_last and N % W != 0   (Python: ceil((N - W) / W))
//                 ceil(N / W)    otherwise
//   total_size  = num_samples * W
// Each epoch it builds the order (randperm(N) on a generator seeded with seed + epoch when
// shuffling, 0..N-1 otherwise), then either pads it to total_size with its own head, tiled when the
// padding is longer than N, or (drop_last) cuts it to total_size; rank r takes
// order[r : total_size : W]. Every rank rebuilds the whole order, so all ranks agree on it only if
// they agree on N, seed and epoch: that is what set_epoch and a shared seed are for.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddph/sampler/randperm.h"
#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

struct DistributedSamplerOptions {
  bool shuffle = true;    ///< PyTorch's default
  bool dropLast = false;  ///< PyTorch's default
  RandpermImpl randperm = RandpermImpl::kAuto;
};

/// PyTorch's `num_samples` (the length of every rank's shard). See NOTE [PyTorch DistributedSampler].
std::int64_t distributedNumSamples(std::int64_t datasetSize, std::int64_t numReplicas,
                                   bool dropLast);

/// PyTorch's `total_size` (num_samples * num_replicas).
std::int64_t distributedTotalSize(std::int64_t datasetSize, std::int64_t numReplicas,
                                  bool dropLast);

/// Throws ConfigError where PyTorch raises (rank outside [0, W)) and where it is silent but wrong
/// (W <= 0, N < 0).
void validateShardRequest(const ShardRequest& request);

/// The epoch's order before padding: randperm(N) seeded with seed + epoch, or 0..N-1.
std::vector<Index> distributedEpochOrder(std::int64_t datasetSize, std::int64_t seed,
                                         std::int64_t epoch, const DistributedSamplerOptions& options);

/// Rank `request.rank`'s shard of an epoch order: padding or cut, then the stride. Never
/// materialises the padded list.
std::vector<Index> distributedShard(const std::vector<Index>& order, const ShardRequest& request,
                                    bool dropLast);

/// The same for the run over order[start:] (NOTE [Elastic resume]): its positions strided, padded
/// with the head of the whole order, tiled. distributedShard is runShard from 0.
std::vector<Index> runShard(const std::vector<Index>& order, std::int64_t start,
                            const ShardRequest& request, bool dropLast);

/// "pytorch", "elastic (no shuffle) (drop_last)": a sampler's name with its options.
std::string samplerName(std::string base, const DistributedSamplerOptions& options);

/// PyTorch's DistributedSampler behind the Sampler interface.
class DistributedSampler final : public Sampler {
 public:
  explicit DistributedSampler(DistributedSamplerOptions options = {});

  std::string name() const override;
  std::vector<Index> indices(const ShardRequest& request) override;
  std::optional<std::int64_t> declaredLength(const ShardRequest& request) override;
  /// Builds the epoch's order once and shards it for every rank.
  Partition partition(const SamplerCase& c) override;

  const DistributedSamplerOptions& options() const { return options_; }

 private:
  DistributedSamplerOptions options_;
};

}  // namespace ddph::sampler
