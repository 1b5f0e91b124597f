// Whether every rank's loader in a pass holds one dataset, before its partition is judged: the
// same parts (a ConcatDataset's), length, file listing and items (dataset_identity.cpp compares
// parts and items). A DistributedSampler splits indices: on datasets that differ across ranks,
// index i names another sample on each rank. Under a sampler that does not split one dataset,
// each rank's own data is by design, and what is judged is whether some ranks share theirs
// (NOTE [Ranks that share a dataset of their own]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "data_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// "ranks 0, 2 in order A; rank 1 in order B": the fingerprints are hashes, so the orders are
// named A, B, … (the one most ranks hold first, then the one rank 0 holds).
std::vector<std::string> namedOrders(
    const std::map<std::string, std::vector<std::int64_t>>& byListing) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> sides(byListing.begin(),
                                                                       byListing.end());
  std::sort(sides.begin(), sides.end(), [](const auto& a, const auto& b) {
    return a.second.size() != b.second.size() ? a.second.size() > b.second.size()
                                              : a.second.front() < b.second.front();
  });
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < sides.size(); ++i) {
    parts.push_back(fmt::format("{} in order {}", rankList(sides[i].second),
                                static_cast<char>('A' + std::min<std::size_t>(i, 25))));
  }
  return parts;
}

// The ranks' Subsets of one base are pairwise disjoint: the ranks split the base themselves (a
// shard by rank), and a DistributedSampler over each shard splits it again. The base's size, or
// nothing.
std::optional<std::int64_t> subsetsSplitTheBase(const std::vector<RankPass>& ranks, std::int64_t loader) {
  std::set<sampler::Index> seen;
  std::int64_t base = -1;
  for (const auto& rp : ranks) {
    const LoaderRecord& l = rp.trace->loaders.at(loader);
    if (!l.subsetIndices || (base >= 0 && l.subsetOf != base)) return std::nullopt;
    base = l.subsetOf;
    for (sampler::Index i : *l.subsetIndices) {
      if (!seen.insert(i).second) return std::nullopt;
    }
  }
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  if (!s || s->order != OrderKind::kTorchDistributed) return std::nullopt;
  return base;
}

// The coverage finding of ranks whose listings differ; `attribute`: what the listing was read
// from ("subset-indices", "subset": different Subsets of a base).
Violation differentListings(const std::vector<RankPass>& ranks, std::int64_t loader, std::int64_t k,
                            const std::map<std::string, std::vector<std::int64_t>>& byListing,
                            const std::string& attribute) {
  const RankPass& first = ranks[0];
  const std::vector<std::string> parts = namedOrders(byListing);
  Violation v;
  v.property = std::string(property::kCoverage);
  v.epoch = k;
  if (attribute == "subset-indices" || attribute == "subset") {
    v.detail = fmt::format("{}: the ranks' datasets are different Subsets of their base dataset "
                           "(their indices differ: {}), so the ranks' shards do not split one "
                           "dataset: samples one rank trains on are left out, or held out for "
                           "validation, on another",
                           describeLoader(*first.trace, loader), fmt::join(parts, "; "));
    if (const auto base = subsetsSplitTheBase(ranks, loader)) {
      // Sharded twice: by the program's own per-rank Subsets, then by DistributedSampler.
      const auto w = static_cast<std::int64_t>(ranks.size());
      v.likelyCause = fmt::format(
          "the ranks' Subsets already split the base of {} samples by rank (no two share a "
          "sample), and each rank's DistributedSampler splits its own Subset again across the {} "
          "ranks: each rank trains about 1/{} of its Subset, and most of the base is never trained",
          *base, w, w);
      v.help = "shard once: give every rank the whole dataset under DistributedSampler, or keep "
               "the per-rank Subsets and iterate each without a DistributedSampler";
      return v;
    }
    v.likelyCause = "each rank splits the dataset with its own random state (random_split or a "
                    "shuffled index list after a per-rank seed such as torch.manual_seed(rank))";
    v.help = "split with a generator seeded alike on every rank: random_split(dataset, lengths, "
             "generator=torch.Generator().manual_seed(0)), or split once and share the indices";
  } else {
    v.detail = fmt::format("{}: the ranks' datasets list their samples in different orders (their "
                           "`{}`: {}), so an index names a different sample on each rank and the "
                           "shards overlap and leave samples out, however the sampler splits the "
                           "indices",
                           describeLoader(*first.trace, loader), attribute, fmt::join(parts, "; "));
    v.likelyCause = "each rank lists its files itself (os.listdir and glob give no defined order, "
                    "and nodes differ)";
    v.help = "sort the listing (sorted(os.listdir(root))) or build it once and share it";
  }
  return v;
}

// Ranks whose datasets list the same samples in different orders: index i is another sample on
// each, however well the sampler splits the indices.
bool sameListing(DataFindings& findings, std::int64_t loader, std::int64_t k,
                 const std::vector<RankPass>& ranks) {
  std::map<std::string, std::vector<std::int64_t>> byListing;
  for (const auto& rp : ranks) {
    const std::string& f = rp.trace->loaders.at(loader).datasetFingerprint;
    if (f.empty()) return true;  // not known on every rank: nothing to compare
    byListing[f].push_back(rp.trace->rank);
  }
  if (byListing.size() == 1) return true;
  const std::string& f0 = byListing.begin()->first;
  const std::string attribute = f0.substr(0, f0.find(':'));
  // Different Subsets of a base with no listing: only a DistributedSampler promises one dataset
  // on every rank. Under another sampler each rank has its own dataset by design (a split by
  // rank into Subsets): its indices are not one index space, and no partition is judged.
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  if (attribute == "subset-indices" && !promisesOneDataset(s)) return false;
  findings.record(loader, differentListings(ranks, loader, k, byListing, attribute), "listing");
  return false;
}

// NOTE [Data of each node's own] (docs/multi-node.md): the ranks' data differ exactly by node
// (every rank of a node holds the same data, and not every node the same) under a sampler that splits
// over the whole world: a node-local dataset (its own shard files, a cache on its disk) that the
// sampler treats as one. The cause, or nothing.
std::optional<Explanation> nodeLocalData(const std::vector<RankPass>& ranks, std::int64_t loader) {
  std::map<std::string, std::vector<std::int64_t>> byData;
  std::map<int, std::set<std::string>> dataOfNode;
  for (const auto& rp : ranks) {
    if (!rp.trace->node) return std::nullopt;
    const std::string id = datasetIdentity(rp.trace->loaders.at(loader));
    byData[id].push_back(rp.trace->rank);
    dataOfNode[*rp.trace->node].insert(id);
  }
  if (byData.size() < 2 || dataOfNode.size() < 2) return std::nullopt;
  for (const auto& [node, ids] : dataOfNode) {
    if (ids.size() != 1) return std::nullopt;  // a node whose ranks differ: not per node
  }
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  return Explanation{
      fmt::format("each node holds data of its own (every rank of a node the same, the nodes "
                  "other data: its own shard files, a cache on its local disk) while {} splits "
                  "over the whole world ({} replicas, by global rank), so each node's ranks draw "
                  "only their global ranks' slices of their node's data: the rest of every node's "
                  "data is never trained, and no rank sees another node's",
                  s ? s->className : std::string("the sampler"),
                  s && s->numReplicas ? std::to_string(*s->numReplicas) : std::string("W")),
      "split within the node (num_replicas=LOCAL_WORLD_SIZE, rank=LOCAL_RANK) when each node "
      "reads its own part, or give every node the whole dataset"};
}

// Data that differ across ranks: a finding under a sampler that promises one dataset, else a
// note that no partition across ranks is judged.
bool differentData(DataFindings& findings, std::int64_t loader, std::int64_t k,
                   const std::vector<RankPass>& ranks, Violation v) {
  if (promisesOneDataset(samplerOf(*ranks[0].trace, loader))) {
    if (auto perNode = nodeLocalData(ranks, loader)) explain(v, std::move(*perNode));
    v.epoch = k;
    findings.record(loader, v, "listing");
  } else {
    findings.notApplicable(loader, fmt::format("the ranks hold different datasets under {}, which "
                                               "does not split one dataset across ranks: each "
                                               "rank's data is its own, and no partition across "
                                               "ranks is judged",
                                               samplerClass(ranks[0])));
  }
  return false;
}

}  // namespace

std::optional<std::int64_t> commonDatasetLen(DataFindings& findings, std::int64_t loader,
                                             std::int64_t k, const std::vector<RankPass>& ranks) {
  std::map<std::int64_t, std::vector<std::int64_t>> byLen;
  for (const auto& rp : ranks) byLen[rp.pass->datasetLen].push_back(rp.trace->rank);
  if (byLen.size() == 1) return byLen.begin()->first;
  // Only a DistributedSampler promises to split one dataset; other samplers over per-rank
  // datasets (a manual split into Subsets) are each rank's own business.
  if (!promisesOneDataset(samplerOf(*ranks[0].trace, loader))) return std::nullopt;
  std::vector<std::string> parts;
  for (const auto& [n, rs] : byLen) parts.push_back(fmt::format("{} {}", rankList(rs), n));
  Violation v;
  v.property = std::string(property::kCoverage);
  v.epoch = k;
  v.detail = fmt::format("{}: the ranks' datasets differ in length ({}), so their shards do not "
                         "split one dataset",
                         describeLoader(*ranks[0].trace, loader), fmt::join(parts, ", "));
  explain(v, differentDataCause("length"));
  findings.record(loader, v);
  return std::nullopt;
}

bool sameDataset(DataFindings& findings, std::int64_t loader, std::int64_t k,
                 const std::vector<RankPass>& ranks) {
  const std::vector<const RankTrace*> traces = tracesOf(ranks);
  if (auto v = differentComposition(traces, loader)) {
    return differentData(findings, loader, k, ranks, *v);
  }
  if (!commonDatasetLen(findings, loader, k, ranks)) return false;
  if (!sameListing(findings, loader, k, ranks)) return false;
  const auto found = differentItems(traces, loader);
  for (const auto& v : found) differentData(findings, loader, k, ranks, v);
  return found.empty();
}

// NOTE [Ranks that share a dataset of their own]: under a sampler that does not split one
// dataset, each rank's data is its own; some ranks holding the same data train on it twice.
void checkSharedOwnData(DataFindings& findings, std::int64_t loader, std::int64_t k,
                        const std::vector<RankPass>& ranks) {
  if (promisesOneDataset(samplerOf(*ranks[0].trace, loader))) return;
  const std::vector<const RankTrace*> traces = tracesOf(ranks);
  if (auto v = sharedOwnDatasets(traces, loader)) {
    findings.judged(property::kDisjointness);
    v->epoch = k;
    findings.record(loader, *v, "own-data");
    return;
  }
  // A validation Subset per rank is no evaluation across ranks.
  if (!trainsOnBatches(*ranks[0].pass)) return;
  if (auto v = overlappingSubsets(traces, loader)) {
    findings.judged(property::kCoverage);
    v->epoch = k;
    findings.record(loader, *v, "own-data");
  }
}

}  // namespace ddph::audit
