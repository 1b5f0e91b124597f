#include "rank_sources.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ddph/common/error.h"
#include "ddph/sampler/batching.h"
#include "ddph/sampler/builtin_samplers.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::scenario {

using sampler::makeBatches;

using sampler::distributedEpochOrder;
using sampler::DistributedSamplerOptions;
using sampler::Index;
using sampler::makeBuiltinSampler;

RankSources buildRankSources(const Scenario& s, std::int64_t rank) {
  RankSources out;
  std::vector<DatasetSpec> specs;
  if (s.combine == Combine::kConcat) {
    DatasetSpec all = s.datasets.front();
    all.size = 0;
    std::vector<std::string> names;
    for (const auto& d : s.datasets) {
      out.checked.push_back({d.name, d.size, 0, all.size, &d, Checked::Scope::kPartOfConcat});
      all.size += d.size;
      names.push_back(d.name);
    }
    all.name = fmt::format("concat({})", fmt::join(names, " + "));
    out.checked.push_back({all.name, all.size, 0, 0, &s.datasets.front(),
                           Checked::Scope::kConcatenation});
    specs.push_back(all);
  } else {
    for (std::size_t i = 0; i < s.datasets.size(); ++i) {
      out.checked.push_back({s.datasets[i].name, s.datasets[i].size, i, 0, &s.datasets[i]});
      specs.push_back(s.datasets[i]);
    }
  }
  for (auto& spec : specs) {
    Source src;
    src.spec = spec;
    if (spec.sampler != "strided") {
      src.sampler = makeBuiltinSampler(spec.sampler, spec.shuffle, spec.samplerDropLast);
    }
    if (s.faults.perRankOrder) {
      // NOTE [Unsorted file listing]: os.listdir / glob order differs between machines; each
      // rank's index i then names a different file. Every rank gets its own fixed order.
      src.listing.resize(static_cast<std::size_t>(spec.size));
      std::iota(src.listing.begin(), src.listing.end(), 0);
      std::mt19937_64 gen(0x5eedULL + static_cast<std::uint64_t>(rank));
      std::shuffle(src.listing.begin(), src.listing.end(), gen);
    }
    out.sources.push_back(std::move(src));
  }
  return out;
}

std::vector<Index> shardOf(const Source& src, std::int64_t world, std::int64_t rank,
                           std::int64_t epoch, std::int64_t seed) {
  const std::int64_t n = src.spec.size;
  std::vector<Index> shard;
  if (src.sampler) {
    shard = src.sampler->indices({n, world, rank, epoch, seed});
  } else {
    // "strided": order[rank::W] with no padding, as hand-rolled sharding does.
    DistributedSamplerOptions options;
    options.shuffle = src.spec.shuffle;
    const auto order = distributedEpochOrder(n, seed, epoch, options);
    for (std::int64_t k = rank; k < n; k += world) shard.push_back(order[k]);
  }
  if (!src.listing.empty()) {
    for (auto& i : shard) i = src.listing[static_cast<std::size_t>(i)];
  }
  return shard;
}

std::vector<std::vector<Index>> batchesOf(const Scenario& s, const Source& src, std::int64_t world,
                                          std::int64_t rank, std::int64_t epoch,
                                          std::int64_t seed) {
  return makeBatches(shardOf(src, world, rank, epoch, seed), {s.batchSize, s.dropLast});
}

std::int64_t stepsBeforeStop(const Scenario& s, const Source& src) {
  DDPH_ASSERT(s.resume);
  const auto batches = batchesOf(s, src, s.worldSize, 0, 0, s.seed);
  return std::min<std::int64_t>(static_cast<std::int64_t>(batches.size()),
                                s.resume->stopAfterSteps);
}

}  // namespace ddph::scenario
