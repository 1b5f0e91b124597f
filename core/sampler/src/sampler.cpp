#include "ddph/sampler/sampler.h"

#include "ddph/common/error.h"

namespace ddph::sampler {

std::optional<std::int64_t> Sampler::declaredLength(const ShardRequest& /*request*/) {
  return std::nullopt;
}

Partition Sampler::partition(const SamplerCase& c) {
  DDPH_CHECK(c.numReplicas > 0, "num_replicas must be positive, got {}", c.numReplicas);
  Partition p = Partition::of(c);
  p.ranks.reserve(static_cast<std::size_t>(c.numReplicas));
  bool declares = true;
  for (std::int64_t r = 0; r < c.numReplicas; ++r) {
    const ShardRequest request = c.forRank(r);
    p.ranks.push_back(indices(request));
    if (declares) {
      if (auto length = declaredLength(request)) {
        p.declaredLengths.push_back(*length);
      } else {
        declares = false;
        p.declaredLengths.clear();
      }
    }
  }
  return p;
}

RankSampler::RankSampler(Sampler& sampler, std::int64_t datasetSize, std::int64_t numReplicas,
                         std::int64_t rank, std::int64_t seed)
    : sampler_(sampler), request_{datasetSize, numReplicas, rank, 0, seed} {}

}  // namespace ddph::sampler
