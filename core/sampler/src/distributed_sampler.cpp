#include "ddph/sampler/distributed_sampler.h"

#include "ddph/common/error.h"
#include "ddph/common/huge_pages.h"

namespace ddph::sampler {

using common::adviseHugePages;

std::int64_t distributedNumSamples(std::int64_t datasetSize, std::int64_t numReplicas,
                                   bool dropLast) {
  DDPH_CHECK(numReplicas > 0, "num_replicas must be positive, got {}", numReplicas);
  DDPH_CHECK(datasetSize >= 0, "dataset size must be non-negative, got {}", datasetSize);
  if (dropLast && datasetSize % numReplicas != 0) return datasetSize / numReplicas;
  return (datasetSize + numReplicas - 1) / numReplicas;
}

std::int64_t distributedTotalSize(std::int64_t datasetSize, std::int64_t numReplicas,
                                  bool dropLast) {
  return distributedNumSamples(datasetSize, numReplicas, dropLast) * numReplicas;
}

void validateShardRequest(const ShardRequest& request) {
  DDPH_CHECK(request.numReplicas > 0, "num_replicas must be positive, got {}",
             request.numReplicas);
  DDPH_CHECK(request.datasetSize >= 0, "dataset size must be non-negative, got {}",
             request.datasetSize);
  DDPH_CHECK(request.rank >= 0 && request.rank < request.numReplicas,
             "Invalid rank {}, rank should be in the interval [0, {}]", request.rank,
             request.numReplicas - 1);
}

std::vector<Index> distributedEpochOrder(std::int64_t datasetSize, std::int64_t seed,
                                         std::int64_t epoch,
                                         const DistributedSamplerOptions& options) {
  DDPH_CHECK(datasetSize >= 0, "dataset size must be non-negative, got {}", datasetSize);
  if (options.shuffle) {
    // Python adds two ints and hands the sum to manual_seed, which wraps negatives to uint64.
    const auto generatorSeed = static_cast<std::uint64_t>(seed) + static_cast<std::uint64_t>(epoch);
    return torchRandperm(datasetSize, generatorSeed, options.randperm);
  }
  std::vector<Index> order(static_cast<std::size_t>(datasetSize));
  for (std::int64_t i = 0; i < datasetSize; ++i) order[i] = i;
  return order;
}

std::vector<Index> distributedShard(const std::vector<Index>& order, const ShardRequest& request,
                                    bool dropLast) {
  return runShard(order, 0, request, dropLast);
}

std::vector<Index> runShard(const std::vector<Index>& order, std::int64_t start,
                            const ShardRequest& request, bool dropLast) {
  validateShardRequest(request);
  const std::int64_t n = request.datasetSize;
  DDPH_ASSERT(static_cast<std::int64_t>(order.size()) == n && start >= 0 && start <= n);
  const std::int64_t length = n - start;
  const std::int64_t numSamples = distributedNumSamples(length, request.numReplicas, dropLast);
  std::vector<Index> shard;
  shard.reserve(static_cast<std::size_t>(numSamples));  // written once, not zeroed first
  // Position p of the padded run is order[start + p] within it and order[(p - length) % N]
  // above: the padding is the head of the order, tiled (see NOTE [PyTorch DistributedSampler]).
  std::int64_t p = request.rank;
  for (std::int64_t k = 0; k < numSamples; ++k, p += request.numReplicas) {
    shard.push_back(p < length ? order[start + p] : order[(p - length) % n]);
  }
  return shard;
}

std::string samplerName(std::string base, const DistributedSamplerOptions& options) {
  if (!options.shuffle) base += " (no shuffle)";
  if (options.dropLast) base += " (drop_last)";
  return base;
}

DistributedSampler::DistributedSampler(DistributedSamplerOptions options) : options_(options) {}

std::string DistributedSampler::name() const { return samplerName("pytorch", options_); }

std::vector<Index> DistributedSampler::indices(const ShardRequest& request) {
  validateShardRequest(request);
  const auto order = distributedEpochOrder(request.datasetSize, request.seed, request.epoch, options_);
  return distributedShard(order, request, options_.dropLast);
}

std::optional<std::int64_t> DistributedSampler::declaredLength(const ShardRequest& request) {
  validateShardRequest(request);
  return distributedNumSamples(request.datasetSize, request.numReplicas, options_.dropLast);
}

Partition DistributedSampler::partition(const SamplerCase& c) {
  validateShardRequest(c.forRank(0));
  // DistributedSampler has no resume state: c.resume is ignored (the epoch restarts), as in torch.
  const std::int64_t datasetSize = c.datasetSize, numReplicas = c.numReplicas;
  const auto order = distributedEpochOrder(datasetSize, c.seed, c.epoch, options_);
  Partition p = Partition::of(c);
  const std::int64_t length = distributedNumSamples(datasetSize, numReplicas, options_.dropLast);
  p.ranks.resize(static_cast<std::size_t>(numReplicas));
  for (auto& shard : p.ranks) {
    shard.reserve(static_cast<std::size_t>(length));
    adviseHugePages(shard.data(), shard.capacity() * sizeof(Index));  // NOTE [Huge pages]
  }
  p.declaredLengths.assign(static_cast<std::size_t>(numReplicas), length);
  // distributedShard for every rank in one pass over the padded order: position q goes to rank
  // q % W (reading the order once, not W times with a stride of W).
  const std::int64_t total = length * numReplicas;
  for (std::int64_t q = 0, r = 0; q < total; ++q) {
    p.ranks[static_cast<std::size_t>(r)].push_back(q < datasetSize ? order[q]
                                                                   : order[(q - datasetSize) % datasetSize]);
    if (++r == numReplicas) r = 0;
  }
  return p;
}

}  // namespace ddph::sampler
