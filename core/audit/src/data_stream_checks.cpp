// Iterable datasets: no sampler lists their indices, so a pass is known by its batches' content
// fingerprints (NOTE [Data with no sampler indices]). disjointness: ranks that consumed the same
// batches (a stream not sharded by rank); no-duplicates: batches repeated within one rank's pass
// (every DataLoader worker yielding the whole stream).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "data_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// Every rank's pass handed out batches, each with its content's fingerprint.
bool knownByContent(const std::vector<RankPass>& ranks) {
  for (const auto& rp : ranks) {
    if (rp.pass->batches.empty()) return false;
    for (const auto& b : rp.pass->batches) {
      if (b.fingerprint.empty()) return false;
    }
  }
  return true;
}

// Each rank's batches, and who else consumed each of them.
struct StreamCounts {
  std::int64_t shared = 0, total = 0;  ///< batches on more than one rank, of all the ranks' batches
  std::set<std::int64_t> sharing;      ///< the ranks that hold such batches
  std::vector<std::int64_t> withRepeats;  ///< ranks that consumed a batch twice in the pass
  std::int64_t repeated = 0;              ///< how many batches they consumed again
  std::map<std::string, std::set<std::int64_t>> holders;  ///< fingerprint -> the ranks holding it
};

StreamCounts countStream(const std::vector<RankPass>& ranks) {
  StreamCounts c;
  auto& holders = c.holders;
  for (const auto& rp : ranks) {
    std::set<std::string> own;
    for (const auto& b : rp.pass->batches) {
      if (!own.insert(b.fingerprint).second) ++c.repeated;
      holders[b.fingerprint].insert(rp.trace->rank);
    }
    if (own.size() < rp.pass->batches.size()) c.withRepeats.push_back(rp.trace->rank);
  }
  for (const auto& rp : ranks) {
    for (const auto& b : rp.pass->batches) {
      ++c.total;
      const auto& h = holders.at(b.fingerprint);
      if (h.size() > 1) {
        ++c.shared;
        c.sharing.insert(h.begin(), h.end());
      }
    }
  }
  return c;
}

// Whether every item several ranks hold (a batch, a sample) is held by ranks of different nodes
// only, the ranks spanning more than one node: each node split the stream its own way.
bool sharedAcrossNodesOnly(const std::map<std::string, std::set<std::int64_t>>& holders,
                           const std::vector<RankPass>& ranks) {
  std::set<int> all;
  for (const auto& rp : ranks) {
    if (!rp.trace->node) return false;
    all.insert(*rp.trace->node);
  }
  if (all.size() < 2) return false;
  for (const auto& [item, rs] : holders) {
    if (rs.size() < 2) continue;
    std::set<int> nodes;
    for (auto r : rs) nodes.insert(*ranks[static_cast<std::size_t>(r)].trace->node);
    if (nodes.size() < rs.size()) return false;
  }
  return true;
}

// The cause when only ranks of different nodes share what they consumed.
Explanation splitPerNode() {
  return {"the ranks of one node never share a sample, but ranks of different nodes do: each node "
          "splits the stream its own way (a shard order shuffled with the node's rank in its "
          "seed, or shard lists made per node), so some shards reach two nodes and others none",
          "draw the shard order with the same seed on every node (seed + epoch), then take the "
          "node's and the local rank's share of that one order"};
}

// Where a rank's batches that other ranks consumed too sit in its pass: "its last 8 of 16
// batches", "its first 8 of 16", or "8 of its 16 batches".
std::string sharedPart(const RankPass& rp, const StreamCounts& c) {
  const auto& batches = rp.pass->batches;
  std::vector<bool> shared;
  for (const auto& b : batches) shared.push_back(c.holders.at(b.fingerprint).size() > 1);
  const auto n = static_cast<std::int64_t>(std::count(shared.begin(), shared.end(), true));
  const auto firstShared = std::find(shared.begin(), shared.end(), true) - shared.begin();
  const auto lastShared = shared.rend() - std::find(shared.rbegin(), shared.rend(), true);
  const bool contiguous = lastShared - firstShared == n;
  if (contiguous && lastShared == static_cast<std::int64_t>(shared.size())) {
    return fmt::format("its last {} of {} batches", n, shared.size());
  }
  if (contiguous && firstShared == 0) return fmt::format("its first {} of {} batches", n, shared.size());
  return fmt::format("{} of its {} batches", n, shared.size());
}

Violation sameStreamOnRanks(const RankPass& first, std::int64_t loader, std::int64_t k,
                            const LoaderRecord& l, const StreamCounts& c,
                            const std::vector<RankPass>& ranks) {
  Violation v;
  v.property = std::string(property::kDisjointness);
  v.epoch = k;
  v.ranks.assign(c.sharing.begin(), c.sharing.end());
  v.detail = fmt::format("{}: {} consumed the same batches, "
                         "{} of the {} batches of this epoch are on more than one rank (by "
                         "their content's fingerprint)",
                         describeLoader(*first.trace, loader), rankList(v.ranks), c.shared,
                         c.total);
  const std::string byWorker =
      l.numWorkers > 0 ? ", and by worker too (torch.utils.data.get_worker_info())" : "";
  if (sharedAcrossNodesOnly(c.holders, ranks)) {
    explain(v, splitPerNode());
    return v;
  }
  if (c.shared < c.total) {
    // A part of the stream only: the rest is split by rank, this part is not.
    const RankPass& sharer = *std::find_if(ranks.begin(), ranks.end(), [&](const RankPass& rp) {
      return c.sharing.count(rp.trace->rank) > 0;
    });
    v.likelyCause = fmt::format(
        "a part of the stream is the same on every rank it reaches (rank {}: {}) while the rest "
        "is split by rank: a dataset chained or appended to the sharded one (ChainDataset, "
        "itertools.chain, a second IterableDataset in __iter__) that does not shard itself",
        sharer.trace->rank, sharedPart(sharer, c));
    v.help = "shard every part of the stream by rank in its own __iter__ (itertools.islice(part, "
             "rank, None, world_size))" + byWorker;
    return v;
  }
  v.likelyCause =
      "the IterableDataset yields the same stream on every rank, and no sampler splits an "
      "iterable dataset";
  v.help = "shard it in __iter__ by rank (itertools.islice(stream, rank, None, world_size))" + byWorker;
  return v;
}

Violation sameStreamOnWorkers(const RankPass& first, std::int64_t loader, std::int64_t k,
                              const LoaderRecord& l, const StreamCounts& c) {
  Violation v;
  v.property = std::string(property::kNoDuplicates);
  v.epoch = k;
  v.ranks = c.withRepeats;
  v.detail = fmt::format("{}, {} worker processes: {} consumed {} batches twice or more in "
                         "one epoch (by their content's fingerprint)",
                         describeLoader(*first.trace, loader), l.numWorkers,
                         rankList(c.withRepeats), c.repeated);
  v.likelyCause =
      "every DataLoader worker runs the IterableDataset's whole __iter__, so each worker yields "
      "the same stream";
  v.help = "shard it by worker in __iter__ with torch.utils.data.get_worker_info() (info.id, "
           "info.num_workers), on top of the shard by rank";
  return v;
}

// Each rank's samples by their content (`rows`), when every batch of every rank has them.
struct SampleCounts {
  std::int64_t total = 0;         ///< the ranks' samples
  std::int64_t shared = 0;        ///< of them, on more than one rank
  std::int64_t repeatedOwn = 0;   ///< of them, seen before on the same rank (equal samples)
  std::set<std::int64_t> sharing;
  std::map<std::string, std::set<std::int64_t>> holders;  ///< sample hash -> the ranks holding it
};

std::optional<SampleCounts> countSamples(const std::vector<RankPass>& ranks) {
  SampleCounts c;
  auto& holders = c.holders;
  for (const auto& rp : ranks) {
    std::set<std::string> own;
    for (const auto& b : rp.pass->batches) {
      if (b.rows.empty()) return std::nullopt;
      for (const auto& row : b.rows) {
        ++c.total;
        if (!own.insert(row).second) ++c.repeatedOwn;
        holders[row].insert(rp.trace->rank);
      }
    }
  }
  for (const auto& [row, rs] : holders) {
    if (rs.size() < 2) continue;
    c.shared += static_cast<std::int64_t>(rs.size());
    c.sharing.insert(rs.begin(), rs.end());
  }
  return c;
}

// NOTE [Samples on two ranks in other batches] (docs/audit.md): the ranks' batches differ, but
// their samples overlap (the same shards in another order, per rank or per node). Shared samples
// count when they are at least 5 % of the ranks' samples and far more than the equal samples one
// rank meets within its own pass (data with repeated rows is not a split that overlaps).
std::optional<Violation> sameSamplesOnRanks(const RankPass& first, std::int64_t loader,
                                            std::int64_t k, const std::vector<RankPass>& ranks) {
  const auto counted = countSamples(ranks);
  if (!counted) return std::nullopt;
  const SampleCounts& c = *counted;
  const auto w = static_cast<std::int64_t>(ranks.size());
  if (c.total == 0 || c.shared * 20 < c.total || c.sharing.size() < 2) return std::nullopt;
  if (c.repeatedOwn * (w - 1) * 10 > c.shared) return std::nullopt;
  Violation v;
  v.property = std::string(property::kDisjointness);
  v.epoch = k;
  v.ranks.assign(c.sharing.begin(), c.sharing.end());
  v.detail = fmt::format("{}: {} consumed the same samples in other batches: {} of the {} samples "
                         "of this epoch are on more than one rank (by each sample's content)",
                         describeLoader(*first.trace, loader), rankList(v.ranks), c.shared,
                         c.total);
  if (sharedAcrossNodesOnly(c.holders, ranks)) {
    explain(v, splitPerNode());
    return v;
  }
  v.likelyCause =
      "the ranks' streams overlap in samples: the stream's parts (shards, files) are split so that "
      "some reach more than one rank, in other orders (a shard order shuffled with the rank in "
      "its seed, or shard lists that overlap)";
  v.help = "draw the shard order with the same seed on every rank (seed + epoch), then take the "
           "rank's share of that one order (order[rank::world_size])";
  return v;
}

}  // namespace

// NOTE [Data with no sampler indices] (docs/audit.md): a pass over an iterable dataset is known
// by its batches' content fingerprints. Ranks that consumed the same batches train on the same
// samples (disjointness); batches repeated within one rank's pass come from its workers, each
// yielding the whole stream. Returns whether the pass was such a pass (judged here).
bool checkStream(DataFindings& findings, std::int64_t loader, std::int64_t k,
                 const std::vector<RankPass>& ranks) {
  if (!knownByContent(ranks)) return false;
  const StreamCounts c = countStream(ranks);
  const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
  findings.judged(property::kDisjointness);
  findings.judged(property::kNoDuplicates);
  // A quarter of the batches or more on more than one rank, two or more on each rank that shares
  // them: a part of the stream not split by rank, not a coincidence of equal samples (a dummy
  // batch that evens out the ranks' counts is one).
  const auto sharers = static_cast<std::int64_t>(c.sharing.size());
  if (c.shared * 4 >= c.total && sharers > 1 && c.shared >= 2 * sharers) {
    findings.record(loader, sameStreamOnRanks(ranks[0], loader, k, l, c, ranks), "stream");
  } else if (!c.withRepeats.empty() && l.numWorkers > 0) {
    findings.record(loader, sameStreamOnWorkers(ranks[0], loader, k, l, c), "stream");
  } else if (auto v = sameSamplesOnRanks(ranks[0], loader, k, ranks)) {
    findings.record(loader, *v, "stream");
  }
  return true;
}

namespace {

// Whether the program gave the stream a new epoch between the two passes (its set_epoch).
bool givenANewEpoch(const PassRecord& before, const PassRecord& now) {
  return before.datasetEpoch && now.datasetEpoch && *before.datasetEpoch != *now.datasetEpoch;
}

// NOTE [A stream whose workers are reseeded alike] (docs/audit.md): the pass's DataLoader workers
// drew from the global generators, and began both passes with the very states of those
// generators (the DataLoader seeds them anew for every pass; the program's worker_init_fn
// reseeded them alike).
bool workersReseededAlike(const PassRecord& before, const PassRecord& now) {
  return !now.globalDraws.empty() && !now.workerRng.empty() && before.workerRng == now.workerRng;
}

// numpy's global generator, Python's random module, torch's default generator.
std::string generatorNames(const std::vector<std::string>& generators) {
  std::vector<std::string> names;
  for (const auto& g : generators) {
    const std::string name = globalGenerator(g).first;
    names.push_back(name.substr(0, name.find(" (")));
  }
  return fmt::format("{}", fmt::join(names, " and "));
}

}  // namespace

void checkStreamOrder(DataFindings& findings, std::int64_t loader,
                      const std::vector<RankPass>& previous, const std::vector<RankPass>& ranks) {
  if (previous.size() != ranks.size() || !knownByContent(previous) || !knownByContent(ranks)) return;
  std::int64_t batches = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const PassRecord& before = *previous[r].pass;
    const PassRecord& now = *ranks[r].pass;
    if (previous[r].trace != ranks[r].trace || !before.ended || !now.ended) return;
    // Only a stream the program asked to change (a new epoch given to its set_epoch), or one
    // whose workers drew its batches from generators reseeded alike.
    if (!givenANewEpoch(before, now) && !workersReseededAlike(before, now)) return;
    if (before.batches.size() != now.batches.size()) return;
    for (std::size_t b = 0; b < now.batches.size(); ++b) {
      if (before.batches[b].fingerprint != now.batches[b].fingerprint) return;
    }
    batches += static_cast<std::int64_t>(now.batches.size());
  }
  findings.judged(property::kReshuffle);
  const RankTrace& first = *ranks[0].trace;
  const LoaderRecord& l = first.loaders.at(loader);
  const PassRecord& now = *ranks[0].pass;
  Violation v;
  v.property = std::string(property::kReshuffle);
  v.epoch = now.iter;
  if (!givenANewEpoch(*previous[0].pass, now)) {
    const std::string drawn = generatorNames(now.globalDraws);
    v.detail = fmt::format(
        "{}: every rank's pass {} streamed the same batches in the same order as its pass {} ({} "
        "batches on {} ranks, by their content), although its {} DataLoader workers drew them "
        "from {}",
        describeLoader(first, loader), now.iter, previous[0].pass->iter, batches, ranks.size(),
        l.numWorkers, drawn);
    v.likelyCause = fmt::format(
        "the loader's worker_init_fn reseeds {} alike in every pass (each worker began pass {} "
        "with the state it began pass {} with), and {}.__iter__ draws its order (or its "
        "augmentation) from it: every epoch streams the first epoch's order",
        drawn, now.iter, previous[0].pass->iter, l.dataset);
    v.help = "seed the workers from the seed the DataLoader draws anew for every pass: "
             "np.random.seed(torch.initial_seed() % 2**32) in worker_init_fn, or give the "
             "dataset an epoch (set_epoch) and draw from a generator seeded with seed + epoch";
    findings.record(loader, v, "stream-order");
    return;
  }
  v.detail = fmt::format(
      "{}: every rank's pass {} streamed the same batches in the same order as its pass {} ({} "
      "batches on {} ranks, by their content), although the program called {}.set_epoch({}) "
      "before it (set_epoch({}) before pass {})",
      describeLoader(first, loader), now.iter, previous[0].pass->iter, batches, ranks.size(),
      l.dataset, *now.datasetEpoch, *previous[0].pass->datasetEpoch, previous[0].pass->iter);
  if (l.persistentWorkers && l.numWorkers > 0) {
    v.likelyCause = fmt::format(
        "DataLoader(num_workers={}, persistent_workers=True) keeps its worker processes, and the "
        "copy of {} each received at the first pass: set_epoch on the main process's dataset "
        "never reaches them, so every epoch streams the first epoch's order",
        l.numWorkers, l.dataset);
    v.help = "drop persistent_workers (the workers then take the dataset anew each epoch), or "
             "share the epoch with the workers (a torch.multiprocessing.Value the dataset reads "
             "in __iter__)";
  } else {
    v.likelyCause = fmt::format(
        "{}.set_epoch changes nothing its __iter__ reads: the stream's order is fixed (seeded "
        "once, or from an attribute set_epoch does not set)",
        l.dataset);
    v.help = "draw each epoch's order in __iter__ from seed + the epoch set_epoch stored";
  }
  findings.record(loader, v, "stream-order");
}

}  // namespace ddph::audit
