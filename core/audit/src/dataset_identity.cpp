// Whether the ranks' loaders hold one dataset, beyond its length and file listing: a
// ConcatDataset's parts (how many, in which order, of which lengths and items) and a
// TensorDataset's items (its first, middle and last rows, and its rows hashed in no order). A
// DistributedSampler splits indices: on datasets that differ across ranks, index i names another
// sample on each rank, and the shards overlap and leave samples out however well it splits.
// NOTE [Dataset identity] (docs/audit.md): what the recorder reads is cheap and has no side effect
// (python/ddph_audit/dataset_items.py); the finding names what differs and the likely causes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// Ranks grouped by a value, the largest group first (then the one with the lowest rank).
using Groups = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;

Groups groupRanks(const std::map<std::string, std::vector<std::int64_t>>& by) {
  Groups out(by.begin(), by.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second.size() != b.second.size() ? a.second.size() > b.second.size()
                                              : a.second.front() < b.second.front();
  });
  return out;
}

// The ranks that differ from a majority, or every rank when there is none.
std::vector<std::int64_t> oddRanks(const Groups& groups) {
  std::vector<std::int64_t> out;
  const bool majority = groups.front().second.size() > 1 &&
                        (groups.size() < 2 || groups[1].second.size() < groups[0].second.size());
  for (std::size_t i = majority ? 1 : 0; i < groups.size(); ++i) {
    out.insert(out.end(), groups[i].second.begin(), groups[i].second.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A part's name identifies it only when nothing else does: a name may hold the rank ("cache-3.pt")
// while the content is the same everywhere.
const std::string& identifyingName(const DatasetPart& p) {
  static const std::string kNone;
  return p.fingerprint.empty() && p.items.empty() && p.content.empty() ? p.name : kNone;
}

std::string partKey(const DatasetPart& p) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", p.dataset, identifyingName(p), p.len,
                     p.fingerprint, p.items, p.content);
}

// "TensorDataset 'books', 300 samples".
std::string describePart(const DatasetPart& p) {
  return fmt::format("{}{}{}", p.dataset.empty() ? "a dataset" : p.dataset,
                     p.name.empty() ? "" : fmt::format(" '{}'", p.name),
                     p.len >= 0 ? fmt::format(", {} samples", p.len) : "");
}

constexpr std::size_t kGroupsShown = 4;

// "ranks 0, 2: A B C; rank 1: B A C": each group's parts by letter.
std::string sequences(const Groups& groups, const std::map<std::string, char>& letter,
                      const std::map<std::string, std::vector<std::string>>& keysOf) {
  std::vector<std::string> out;
  for (std::size_t g = 0; g < groups.size() && g < kGroupsShown; ++g) {
    std::string seq;
    for (const auto& key : keysOf.at(groups[g].first)) seq += std::string(seq.empty() ? "" : " ") + letter.at(key);
    out.push_back(fmt::format("{}: {}", rankList(groups[g].second), seq));
  }
  if (groups.size() > kGroupsShown) out.push_back("…");
  return fmt::format("{}", fmt::join(out, "; "));
}

// What differs at one position of the ranks' lists of parts (one part per group of ranks): the
// length, the part itself, its items (or their order), or only its file listing. `kind` says which.
std::string partDifference(const std::vector<const DatasetPart*>& at, const Groups& groups,
                           std::string& kind) {
  std::map<std::string, std::vector<std::int64_t>> byLen;
  std::set<std::string> items, contents;
  bool contentKnown = true;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    auto& rs = byLen[fmt::format("{}", at[g]->len)];
    rs.insert(rs.end(), groups[g].second.begin(), groups[g].second.end());
    std::sort(rs.begin(), rs.end());
    items.insert(at[g]->items);
    contents.insert(at[g]->content);
    contentKnown = contentKnown && !at[g]->content.empty();
  }
  if (byLen.size() > 1) {
    kind = "length";
    std::vector<std::string> lens;
    for (const auto& [len, rs] : groupRanks(byLen)) lens.push_back(fmt::format("{} {}", rankList(rs), len));
    return fmt::format("{} samples", fmt::join(lens, ", "));
  }
  const bool otherPart = std::any_of(at.begin(), at.end(), [&](const DatasetPart* p) {
    return p->dataset != at[0]->dataset || identifyingName(*p) != identifyingName(*at[0]);
  });
  if (otherPart) {
    kind = "parts";
    return "another dataset on some ranks";
  }
  if (items.size() > 1 && !items.count("")) {
    kind = contentKnown ? (contents.size() == 1 ? "order" : "items") : "items-or-order";
    return kind == "order" ? "the same samples in another order"
                           : (kind == "items" ? "other samples" : "other items (first, middle or last)");
  }
  kind = "listing";
  return "another file listing";
}

// "A = TensorDataset 'books', 300 samples; B = …": a letter for each part, the majority's first.
std::string lettersFor(const Groups& groups, const std::map<std::string, std::vector<std::string>>& keysOf,
                       const std::map<std::string, const std::vector<DatasetPart>*>& partsOf,
                       std::map<std::string, char>& letter) {
  std::vector<std::string> legend;
  for (const auto& [seq, rs] : groups) {
    const auto& keys = keysOf.at(seq);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (letter.count(keys[i])) continue;
      const char c = static_cast<char>('A' + std::min<std::size_t>(letter.size(), 25));
      letter[keys[i]] = c;
      legend.push_back(fmt::format("{} = {}", c, describePart((*partsOf.at(seq))[i])));
    }
  }
  return fmt::format("{}", fmt::join(legend, "; "));
}

// The ranks' ConcatDatasets, grouped by their sequence of parts (each part by partKey).
struct Composition {
  Groups groups;
  std::map<std::string, std::vector<std::string>> keysOf;
  std::map<std::string, const std::vector<DatasetPart>*> partsOf;
};

// Nothing when some rank's dataset is not a ConcatDataset, or every rank's holds the same parts
// in the same order.
std::optional<Composition> compositionOf(const std::vector<const RankTrace*>& traces,
                                         std::int64_t loader) {
  std::map<std::string, std::vector<std::int64_t>> bySequence;
  Composition c;
  for (const RankTrace* t : traces) {
    const auto& parts = t->loaders.at(loader).datasetParts;
    if (parts.empty()) return std::nullopt;  // not a ConcatDataset on every rank
    std::vector<std::string> keys;
    for (const auto& p : parts) keys.push_back(partKey(p));
    const std::string seq = fmt::format("{}", fmt::join(keys, "\x1e"));
    bySequence[seq].push_back(t->rank);
    c.keysOf[seq] = keys;
    c.partsOf[seq] = &parts;
  }
  if (bySequence.size() == 1) return std::nullopt;
  c.groups = groupRanks(bySequence);
  return c;
}

// The same parts on every rank, in different orders.
bool holdTheSameParts(const Composition& c) {
  auto sorted = [&](std::string seq) {
    auto keys = c.keysOf.at(seq);
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  return std::all_of(c.groups.begin(), c.groups.end(), [&](const auto& g) {
    return sorted(g.first) == sorted(c.groups.front().first);
  });
}

bool holdAsManyParts(const Composition& c) {
  const auto n0 = c.keysOf.at(c.groups.front().first).size();
  return std::all_of(c.groups.begin(), c.groups.end(),
                     [&](const auto& g) { return c.keysOf.at(g.first).size() == n0; });
}

// As many parts on every rank: what differs, part by part ("part 1 (…): other samples"), a
// part's file listing aside (sameListing names it). `kind`: the gravest difference ("parts",
// then "length", else the first found).
std::vector<std::string> partDifferences(const Composition& c, std::string& kind) {
  std::vector<std::string> differences;
  const auto n0 = c.keysOf.at(c.groups.front().first).size();
  for (std::size_t i = 0; i < n0; ++i) {
    std::vector<const DatasetPart*> at;
    for (const auto& g : c.groups) at.push_back(&(*c.partsOf.at(g.first))[i]);
    if (std::all_of(at.begin(), at.end(),
                    [&](const DatasetPart* p) { return partKey(*p) == partKey(*at[0]); }))
      continue;
    std::string k;
    const std::string what = partDifference(at, c.groups, k);
    if (k == "listing") continue;  // a part's file listing: sameListing names it
    if (kind.empty() || k == "parts" || (k == "length" && kind != "parts")) kind = k;
    DatasetPart named = *at[0];
    named.len = k == "length" ? -1 : named.len;
    differences.push_back(fmt::format("part {} ({}): {}", i, describePart(named), what));
  }
  return differences;
}

}  // namespace

std::string datasetIdentity(const LoaderRecord& l) {
  std::string id = fmt::format("{}|{}|{}|{}", l.dataset, l.datasetFingerprint, l.datasetItems,
                               l.datasetContent);
  for (const auto& p : l.datasetParts) {
    id += fmt::format("|{}:{}:{}:{}:{}", p.dataset, p.len, p.fingerprint, p.items, p.content);
  }
  return id;
}

bool datasetHashed(const LoaderRecord& l) {
  return !l.datasetFingerprint.empty() || !l.datasetItems.empty() || !l.datasetContent.empty() ||
         !l.datasetParts.empty();
}

Explanation differentDataCause(const std::string& kind) {
  if (kind == "order") {
    return {"the data was permuted on each rank before the sampler, with a per-rank random state "
            "(torch.randperm or random.shuffle after a per-rank seed such as "
            "torch.manual_seed(rank))",
            "leave the shuffling to DistributedSampler (shuffle=True and set_epoch), or permute "
            "with a generator seeded alike on every rank"};
  }
  if (kind == "length") {
    return {"each rank filters or lists that data itself: a random filter or subsample after a "
            "per-rank seed, a listing that differs between nodes, or a file missing on one node; "
            "the trace cannot tell which",
            "filter with a random state seeded alike on every rank (or filter once and share the "
            "kept indices), and list the same files everywhere"};
  }
  const bool orderToo = kind == "items-or-order";
  return {fmt::format(
              "{}each rank made or picked{} its data with its own random state (a random subset, "
              "torch.randn{} after a per-rank seed such as torch.manual_seed(rank)), or read "
              "other data (another file or node); the trace cannot tell which",
              orderToo ? "the ranks' data differ in content or in order (the data is too large "
                         "for the digest that would tell which): "
                       : "",
              orderToo ? " or ordered" : "", orderToo ? " or a shuffle" : ""),
          "build the data the same way on every rank (a generator seeded alike, "
          "torch.Generator().manual_seed(0), the same files), or build it on one rank and "
          "broadcast it"};
}

std::optional<Violation> differentComposition(const std::vector<const RankTrace*>& traces,
                                              std::int64_t loader) {
  const std::optional<Composition> c = compositionOf(traces, loader);
  if (!c) return std::nullopt;
  std::map<std::string, char> letter;
  const std::string legend = lettersFor(c->groups, c->keysOf, c->partsOf, letter);
  const std::string about = describeLoader(*traces.front(), loader);
  Violation v;
  v.property = std::string(property::kCoverage);
  v.ranks = oddRanks(c->groups);
  const std::string consequence =
      ", so the ranks' shards do not split one dataset: index i names another sample on each rank, "
      "and samples are trained twice or never";
  const std::string tail = fmt::format(" ({}){}", legend, consequence);
  const auto n0 = c->keysOf.at(c->groups.front().first).size();
  if (holdTheSameParts(*c)) {
    v.detail = fmt::format("{}: the ranks' ConcatDatasets hold the same {} parts in different "
                           "orders ({}){}",
                           about, n0, sequences(c->groups, letter, c->keysOf), tail);
    v.likelyCause =
        "each rank builds its list of parts in its own order: a listing of shard files (os.listdir "
        "and glob give no defined order, and nodes differ), iteration over a set (string hashes "
        "differ per process), or a shuffle of the list after a per-rank seed; the trace cannot "
        "tell which";
    v.help = "sort the list of parts (or shuffle it with a seed shared by every rank) before "
             "ConcatDataset";
    return v;
  }
  if (!holdAsManyParts(*c)) {
    v.detail = fmt::format("{}: the ranks' ConcatDatasets are composed of different parts ({}){}",
                           about, sequences(c->groups, letter, c->keysOf), tail);
    v.likelyCause =
        "each rank picks the parts itself: a listing of sources that differs between nodes, a "
        "part skipped on some ranks (a missing or unreadable file, a per-rank condition), or a "
        "per-rank choice; the trace cannot tell which";
    v.help = "build the same list of parts on every rank (sorted, from one listing shared by all)";
    return v;
  }
  std::string kind;
  const std::vector<std::string> differences = partDifferences(*c, kind);
  if (differences.empty()) return std::nullopt;
  v.detail = fmt::format("{}: the ranks' ConcatDatasets differ in {} of their {} parts ({}){}",
                         about, differences.size(), n0, fmt::join(differences, "; "), consequence);
  if (kind == "parts") {
    v.likelyCause = "each rank picks the parts itself (a listing of sources that differs between "
                    "nodes, a per-rank choice)";
    v.help = "build the same list of parts on every rank";
  } else {
    explain(v, differentDataCause(kind));
  }
  return v;
}

namespace {

// The coverage finding of items that differ across ranks, and whether they are the same samples
// in other orders (the content digests agree).
struct ItemsFinding {
  Violation coverage;
  bool sameSamples = false;
};

// differentItems over a TensorDataset's tensors, or (`columns`) over the column tensors of a
// dataset of the program's own, which is judged only when they hold the same rows in other orders
// (NOTE [A dataset of column tensors]: a column may be per-rank state, not samples).
std::optional<ItemsFinding> itemsDiffer(const std::vector<const RankTrace*>& traces,
                                        std::int64_t loader, bool columns) {
  std::map<std::string, std::vector<std::int64_t>> byItems;
  std::set<std::string> contents;
  bool contentKnown = true;
  for (const RankTrace* t : traces) {
    const LoaderRecord& l = t->loaders.at(loader);
    const std::string& items = columns ? l.columnItems : l.datasetItems;
    const std::string& content = columns ? l.columnContent : l.datasetContent;
    if (items.empty()) return std::nullopt;  // not read on every rank
    byItems[items].push_back(t->rank);
    contents.insert(content);
    contentKnown = contentKnown && !content.empty();
  }
  if (byItems.size() == 1) return std::nullopt;
  const std::string kind =
      contentKnown ? (contents.size() == 1 ? "order" : "items") : "items-or-order";
  if (columns && kind != "order") return std::nullopt;
  const Groups groups = groupRanks(byItems);
  std::vector<std::string> parts;
  const bool eachOwn = groups.size() == traces.size();
  if (eachOwn) parts.push_back("each rank its own");
  for (std::size_t g = 0; !eachOwn && g < groups.size() && g < kGroupsShown; ++g) {
    parts.push_back(fmt::format("{} data {}", rankList(groups[g].second),
                                static_cast<char>('A' + std::min<std::size_t>(g, 25))));
  }
  if (!eachOwn && groups.size() > kGroupsShown) parts.push_back("…");
  const RankTrace& first = *traces.front();
  const LoaderRecord& l = first.loaders.at(loader);
  Violation v;
  v.property = std::string(property::kCoverage);
  v.ranks = oddRanks(groups);
  v.detail = fmt::format(
      "{}: the ranks' {}s hold {} ({}; compared by {}their first, middle and last rows{}), so the "
      "ranks' shards do not split one dataset: index i names another sample on each rank, and "
      "samples are trained twice or never",
      describeLoader(first, loader), l.dataset,
      kind == "order" ? "the same samples in different orders"
                      : (kind == "items" ? "different samples" : "different items"),
      fmt::join(parts, "; "),
      columns ? fmt::format("its column tensors {}: ", fmt::join(l.datasetColumns, ", ")) : "",
      contentKnown ? " and a digest of all their rows that ignores their order" : "");
  if (columns) {
    explain(v, {fmt::format("the ranks built {} in different orders: one sorted or permuted its "
                            "rows and the others did not (a dataset built on one rank and "
                            "loaded from a cache or file on the others, bypassing the constructor "
                            "that orders it), or each permuted it with its own random state",
                            l.dataset),
                "build the dataset the same way on every rank (load the cache on every rank, "
                "rank 0 included, or order the rows where the cache is written)"});
  } else {
    explain(v, differentDataCause(kind));
  }
  return ItemsFinding{v, kind == "order"};
}

}  // namespace

std::vector<Violation> differentItems(const std::vector<const RankTrace*>& traces,
                                      std::int64_t loader) {
  auto found = itemsDiffer(traces, loader, false);
  if (!found) found = itemsDiffer(traces, loader, true);
  if (!found) return {};
  const Violation& v = found->coverage;
  if (!found->sameSamples) return {v};
  Violation copies = v;
  copies.property = std::string(property::kDisjointness);
  copies.detail = fmt::format("{}: the ranks hold the same samples in different orders, so a "
                              "sample one rank draws at index i another draws at index j: samples "
                              "are trained on more than one rank (and others on none: the coverage "
                              "finding)",
                              describeLoader(*traces.front(), loader));
  return {v, copies};
}

// NOTE [Ranks that share a dataset of their own] (docs/audit.md): each rank holds its own data
// (a sampler that does not split one dataset; their listings or rows differ), yet some ranks hold
// the same data: they train on the same samples, each of those samples counted on all of them.
std::optional<Violation> sharedOwnDatasets(const std::vector<const RankTrace*>& traces,
                                           std::int64_t loader) {
  std::map<std::string, std::vector<std::int64_t>> byData;
  for (const RankTrace* t : traces) {
    const LoaderRecord& l = t->loaders.at(loader);
    if (!datasetHashed(l)) return std::nullopt;  // nothing known of this rank's data
    byData[datasetIdentity(l)].push_back(t->rank);
  }
  if (byData.size() < 2) return std::nullopt;  // one dataset on every rank: the partition's to judge
  const Groups groups = groupRanks(byData);
  std::vector<std::string> shared;
  std::vector<std::int64_t> ranks;
  for (const auto& [key, rs] : groups) {
    if (rs.size() < 2) continue;
    shared.push_back(rankList(rs));
    ranks.insert(ranks.end(), rs.begin(), rs.end());
  }
  if (ranks.empty()) return std::nullopt;
  std::sort(ranks.begin(), ranks.end());
  const RankTrace& first = *traces.front();
  Violation v;
  v.property = std::string(property::kDisjointness);
  v.ranks = ranks;
  v.detail = fmt::format(
      "{}: each rank holds a dataset of its own (their listings or rows differ), but {} hold the "
      "same one ({} datasets among {} ranks), so they train on the same samples",
      describeLoader(first, loader), fmt::join(shared, "; "), groups.size(), traces.size());
  // Ranks that share their data share a local rank on different nodes: the data was made or
  // picked from LOCAL_RANK.
  bool byLocalRank = true;
  for (const auto& [key, rs] : groups) {
    std::set<int> locals, nodes;
    for (auto r : rs) {
      const RankTrace* t = nullptr;
      for (const RankTrace* c : traces) t = c->rank == r ? c : t;
      if (!t || !t->localRank || !t->node) byLocalRank = false;
      if (t && t->localRank) locals.insert(*t->localRank);
      if (t && t->node) nodes.insert(*t->node);
    }
    if (rs.size() > 1 && (locals.size() != 1 || nodes.size() != rs.size())) byLocalRank = false;
  }
  v.likelyCause =
      byLocalRank
          ? "the ranks that share their data have the same LOCAL_RANK on different nodes: the data "
            "was made or picked from LOCAL_RANK (torch.manual_seed(local_rank) before a random "
            "split or draw, a shard index from LOCAL_RANK), which repeats on every node"
          : "the ranks make or pick their data from something that does not differ on every "
            "rank (a seed, a shard index or a file name from another value than the rank, or "
            "two ranks given the same one)";
  v.help = byLocalRank ? "use the global RANK (dist.get_rank()) for anything that must differ "
                         "across the world"
                       : "derive it from dist.get_rank(), or split one dataset with "
                         "DistributedSampler";
  return v;
}

// NOTE [Shards that are Subsets of one base] (docs/audit.md, "Ranks that share a dataset of
// their own"): each rank trains on a Subset of one base dataset, the Subsets of sizes that split
// it (N / W each, give or take one), yet their indices overlap or leave samples out: each rank
// drew its own split (a permutation or random_split after a per-rank seed). Counted over the base.
std::optional<Violation> overlappingSubsets(const std::vector<const RankTrace*>& traces,
                                            std::int64_t loader) {
  std::int64_t base = -1, total = 0;
  const auto w = static_cast<std::int64_t>(traces.size());
  for (const RankTrace* t : traces) {
    const auto l = t->loaders.find(loader);
    if (l == t->loaders.end() || !l->second.subsetIndices) return std::nullopt;
    if (base >= 0 && l->second.subsetOf != base) return std::nullopt;
    base = l->second.subsetOf;
    total += static_cast<std::int64_t>(l->second.subsetIndices->size());
  }
  if (base <= 0 || w < 2) return std::nullopt;
  std::vector<std::int64_t> count(static_cast<std::size_t>(base), 0);
  for (const RankTrace* t : traces) {
    const auto& indices = *t->loaders.at(loader).subsetIndices;
    const auto len = static_cast<std::int64_t>(indices.size());
    if (len < base / w || len > (base + w - 1) / w) return std::nullopt;  // not a split of N / W
    for (sampler::Index i : indices) {
      if (i < 0 || i >= base) return std::nullopt;
      ++count[static_cast<std::size_t>(i)];
    }
  }
  std::vector<sampler::Index> shared, none;
  for (std::int64_t i = 0; i < base; ++i) {
    if (count[static_cast<std::size_t>(i)] > 1) shared.push_back(i);
    if (count[static_cast<std::size_t>(i)] == 0) none.push_back(i);
  }
  // Chunks of N / W leave the N mod W tail out by design.
  if (shared.empty() && static_cast<std::int64_t>(none.size()) <= base - total) return std::nullopt;
  Violation v;
  v.property = std::string(sampler::property::kCoverage);
  v.detail = fmt::format(
      "{}: the ranks' datasets are Subsets of one base of {} samples, {} samples together as a "
      "split of it would be, but {} of the base's samples are in more than one rank's Subset "
      "({}) and {} in none ({})",
      describeLoader(*traces.front(), loader), base, total, shared.size(),
      shared.empty() ? std::string("none") : describeIndices(shared), none.size(),
      none.empty() ? std::string("none") : describeIndices(none));
  v.likelyCause =
      "each rank drew its own split of the base: a permutation (torch.randperm, random.shuffle) "
      "or random_split after a per-rank seed (torch.manual_seed(seed + rank)), so the shards "
      "overlap and leave samples out";
  v.help = "draw the split with a generator seeded alike on every rank (torch.randperm(n, "
           "generator=torch.Generator().manual_seed(0))) and take indices[rank::world_size], or "
           "use DistributedSampler";
  return v;
}

}  // namespace ddph::audit
