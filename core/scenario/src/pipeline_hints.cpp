#include "pipeline_hints.h"

#include <fmt/format.h>

#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/property.h"

namespace ddph::scenario {

using sampler::distributedNumSamples;
namespace property = sampler::property;

namespace {

// zip(): every loader longer than the shortest loses its last batches.
void addZipHints(const std::vector<DatasetSpec>& datasets, const std::vector<std::size_t>& batchesPerRank,
                 std::vector<PipelineHint>& hints) {
  const std::string coverage(property::kCoverage);
  std::size_t shortest = 0;
  for (std::size_t d = 1; d < batchesPerRank.size(); ++d) {
    if (batchesPerRank[d] < batchesPerRank[shortest]) shortest = d;
  }
  for (std::size_t d = 0; d < batchesPerRank.size(); ++d) {
    if (batchesPerRank[d] == batchesPerRank[shortest]) continue;
    hints.push_back({datasets[d].name, coverage, fmt::format(
        "zip() stops with the shortest loader: {} has {} batches per rank, {} has {}; "
        "the last {} batches of {} are never drawn",
        datasets[shortest].name, batchesPerRank[shortest], datasets[d].name, batchesPerRank[d],
        batchesPerRank[d] - batchesPerRank[shortest], datasets[d].name),
        "cycle the shorter loader or iterate by epochs of the longer"});
  }
}

// cycle: every loader shorter than the longest is drawn more than once an epoch.
void addCycleHints(const std::vector<DatasetSpec>& datasets, const std::vector<std::size_t>& batchesPerRank,
                   std::vector<PipelineHint>& hints) {
  std::size_t longest = 0;
  for (std::size_t d = 1; d < batchesPerRank.size(); ++d) {
    if (batchesPerRank[d] > batchesPerRank[longest]) longest = d;
  }
  for (std::size_t d = 0; d < batchesPerRank.size(); ++d) {
    if (batchesPerRank[d] == batchesPerRank[longest] || batchesPerRank[d] == 0) continue;
    hints.push_back(
        {datasets[d].name, std::string(property::kDisjointness),
         fmt::format(
             "cycling restarts {}'s loader whenever it runs out: an epoch of {} ({} batches per "
             "rank) draws {}'s {} batches per rank {:.1f} times, so its samples repeat within "
             "the epoch by design (each pass over {} is its own partition)",
             datasets[d].name, datasets[longest].name, batchesPerRank[longest], datasets[d].name,
             batchesPerRank[d],
             static_cast<double>(batchesPerRank[longest]) /
                 static_cast<double>(batchesPerRank[d]),
             datasets[d].name),
         "count its epochs by its own passes if every sample must be seen once"});
  }
}

// One dataset under PyTorch's DistributedSampler: what the DataLoader's drop_last, the sampler's
// drop_last and its padding do to it on `w` ranks.
void addSamplerHints(const Scenario& s, const DatasetSpec& spec, std::int64_t w,
                     std::vector<PipelineHint>& hints) {
  const std::string coverage(property::kCoverage);
  const std::int64_t n = spec.size;
  const std::int64_t perRank = distributedNumSamples(n, w, spec.samplerDropLast);
  if (s.dropLast && perRank % s.batchSize != 0) {
    hints.push_back({spec.name, coverage, fmt::format(
        "DataLoader(drop_last=True) drops the last {} samples of every rank's shard of "
        "{} ({} per epoch); DistributedSampler(drop_last=True) is the one that drops at most "
        "W - 1 = {} samples",
        perRank % s.batchSize, spec.name, (perRank % s.batchSize) * w, w - 1),
        "use DataLoader(drop_last=False), or DistributedSampler(drop_last=True) for equal "
        "shards"});
  }
  if (spec.samplerDropLast && perRank == 0) {
    hints.push_back({spec.name, coverage, fmt::format(
        "DistributedSampler(drop_last=True) with N = {} < W = {} gives num_samples = 0: "
        "no rank gets a sample",
        n, w),
        "use fewer ranks or drop_last=False"});
  }
  const std::int64_t padding = perRank * w - n;
  if (s.phase == "eval" && padding > 0) {
    hints.push_back({spec.name, std::string(property::kNoDuplicates), fmt::format(
        "DistributedSampler pads {} with {} repeated samples to give {} ranks equal "
        "shards; evaluation counts them twice",
        spec.name, padding, w),
        "evaluate without padding (an unpadded sampler, then all_reduce the metric sums)"});
  }
}

}  // namespace

std::vector<PipelineHint> pipelineHints(const Scenario& s, const std::vector<DatasetSpec>& datasets,
                                        const std::vector<std::size_t>& batchesPerRank,
                                        std::int64_t world) {
  std::vector<PipelineHint> hints;
  if (s.combine == Combine::kZip && datasets.size() > 1) addZipHints(datasets, batchesPerRank, hints);
  if (s.combine == Combine::kCycle && datasets.size() > 1) addCycleHints(datasets, batchesPerRank, hints);
  for (const auto& spec : datasets) {
    if (spec.sampler == "pytorch") addSamplerHints(s, spec, world, hints);
  }
  return hints;
}

}  // namespace ddph::scenario
