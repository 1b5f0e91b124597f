// The data properties on a real run. For every pass over a loader (its epoch k), each rank's full
// order is known when the sampler's order is (torch's DistributedSampler recomputed bit-exactly,
// SequentialSampler) or when a recorded pass ran to its end; what each rank consumed is known from
// its batches. Partitions of those go through the property definitions of partition_checks.h:
//  - the sampler's partition: coverage, disjointness; consecutive epochs: reshuffle;
//  - a pass dropped before its end (zip, break, islice): coverage of what was consumed;
//  - an evaluation pass (every batch under no_grad): no-duplicates of what was consumed.
// Each finding is reported once per loader and property, at the first epoch it shows, with the
// number of epochs where it shows.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "audit_checks.h"
#include "ddph/sampler/partition_checks.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/line_protocol_sampler.h"

namespace ddph::audit {

using sampler::checkCoverage;
using sampler::checkDisjointness;
using sampler::checkNoDuplicates;
using sampler::checkRanksAgree;
using sampler::checkReshuffle;
using sampler::checkValidRange;
using sampler::distributedNumSamples;
using sampler::distributedShard;
using sampler::Expectations;
using sampler::Index;
using sampler::Partition;
using sampler::samplerName;
using sampler::ShardRequest;
using sampler::Violation;
namespace property = sampler::property;

const SamplerRecord* samplerOf(const RankTrace& t, std::int64_t loader) {
  const auto l = t.loaders.find(loader);
  if (l == t.loaders.end()) return nullptr;
  const auto s = t.samplers.find(l->second.sampler);
  return s == t.samplers.end() ? nullptr : &s->second;
}

// Whether two passes trained the same model: their DDP modules at the start share one (or either
// pass names none). A trial run's model (Lightning's learning-rate finder: a DDP module of its own,
// thrown away) is not the one trained after it.
bool sameModels(const PassRecord& p, const PassRecord& q) {
  if (p.params.empty() || q.params.empty()) return true;
  return std::any_of(p.params.begin(), p.params.end(),
                     [&](const auto& m) { return q.params.count(m.first) > 0; });
}

// NOTE [A run that ends inside a pass] (docs/audit.md): the loader's last pass on this rank, after
// which the program trained on nothing else: the run (this job of it) ended inside the epoch, by a
// step budget (max_steps, a time limit) or a stop to be resumed. Its rest is not left out by the
// loop; no later epoch of this job could have trained it.
bool runEndsInside(const RankTrace& t, const PassRecord& p) {
  for (const auto& q : t.passes) {
    if (q.startLine <= p.startLine) continue;
    if (q.loader == p.loader) return false;
    if (std::any_of(q.batches.begin(), q.batches.end(), [](const BatchRecord& b) { return b.grad; }) &&
        sameModels(p, q))
      return false;
  }
  return true;
}

// A pass that ran to StopIteration, or handed out len(loader) batches (NOTE [Passes and epochs]).
bool completePass(const PassRecord& p) {
  return p.ended ||
         (p.declaredBatches && static_cast<std::int64_t>(p.batches.size()) >= *p.declaredBatches);
}

namespace {

// Draws with replacement: judged by the `with-replacement` contract (ranks-agree), not by coverage.
bool drawsWithReplacement(const SamplerRecord* s) {
  return s && s->replacement.value_or(false);
}

// A sampler that does not declare replacement but whose own order repeats indices within one rank's
// pass (a hand-written weighted sampler drawing with torch.multinomial(replacement=True)): it never
// promised to cover the dataset. A sampler without replacement repeats an index within one rank
// only when it pads N < W samples, one repeat at most per missing sample.
bool repeatsWithinARank(const SamplerRecord* s, const std::vector<std::optional<std::vector<Index>>>& orders,
                        std::int64_t datasetLen) {
  if (s && s->order != OrderKind::kRecorded) return false;
  const auto world = static_cast<std::int64_t>(orders.size());
  for (const auto& order : orders) {
    if (!order) continue;
    std::set<Index> distinct(order->begin(), order->end());
    const auto repeats = static_cast<std::int64_t>(order->size() - distinct.size());
    if (repeats >= 2 && repeats > world - datasetLen) return true;
  }
  return false;
}

// An evaluation pass: every batch was handed out with gradients off (torch.no_grad()).
bool isEvaluation(const PassRecord& p) {
  return !p.batches.empty() &&
         std::none_of(p.batches.begin(), p.batches.end(), [](const BatchRecord& b) { return b.grad; });
}

// torch's samplers that know nothing of ranks: DataLoader(shuffle=True) makes a RandomSampler,
// DataLoader() a SequentialSampler, each over the whole dataset on every rank.
bool isWholeDatasetSampler(const SamplerRecord* s) {
  return s && (s->className == "torch.utils.data.sampler.RandomSampler" ||
               s->className == "torch.utils.data.sampler.SequentialSampler");
}

// A sampler that splits one dataset across ranks: torch's DistributedSampler, or one that says how
// many replicas it splits for. Under another sampler each rank's own dataset is by design.
bool promisesOneDataset(const SamplerRecord* s) {
  return s && (s->order == OrderKind::kTorchDistributed || s->numReplicas.has_value());
}

struct RankPass {
  const RankTrace* trace = nullptr;
  const PassRecord* pass = nullptr;
  std::optional<std::vector<Index>> order;     ///< everything the sampler yields in this pass
  std::optional<std::vector<Index>> consumed;  ///< the indices of the batches handed out
  bool dropped = false;  ///< ended early while the rank went on normally (not a cycle)
};

}  // namespace

std::optional<std::vector<Index>> samplerOrder(const RankTrace& t, const PassRecord& p,
                                               OrderCache& cache) {
  const SamplerRecord* s = samplerOf(t, p.loader);
  const LoaderRecord& l = t.loaders.at(p.loader);
  if (s && s->order == OrderKind::kTorchDistributed) {
    ShardRequest request;
    request.datasetSize = p.datasetLen;
    request.numReplicas = p.numReplicas.value_or(s->numReplicas.value_or(0));
    request.rank = p.rank.value_or(s->rank.value_or(-1));
    request.epoch = p.samplerEpoch.value_or(0);
    request.seed = p.seed.value_or(s->seed.value_or(0));
    if (request.numReplicas <= 0 || request.rank < 0 || request.rank >= request.numReplicas ||
        request.datasetSize < 0) {
      return std::nullopt;
    }
    const bool dropLast = p.dropLast.value_or(s->dropLast.value_or(false));
    const auto& order =
        cache.order(request.datasetSize, request.seed, request.epoch, p.shuffle.value_or(true));
    return distributedShard(order, request, dropLast);
  }
  if (s && s->order == OrderKind::kSequential) {
    std::vector<Index> order(static_cast<std::size_t>(std::max<std::int64_t>(0, p.datasetLen)));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<Index>(i);
    return order;
  }
  // Recorded: known only when the pass ran to its end and every batch carries its indices (a
  // batch sampler's dropped last batch is then unknown; close enough for the checks below).
  if (!p.ended || l.dropLast) return std::nullopt;
  std::vector<Index> order;
  for (const auto& b : p.batches) {
    if (!b.indices) return std::nullopt;
    order.insert(order.end(), b.indices->begin(), b.indices->end());
  }
  return order;
}

namespace {

// The pass of another loader that ran out while `p` was running (zip's shorter loader), or null.
// zip() makes both iterators before its first round, so the partner's pass began before p's last
// batch: a loader iterated after p was left (Lightning's validation after limit_train_batches) is
// none. The partner ran out: StopIteration, or len(loader) batches handed out (Lightning's
// CombinedLoader(mode="min_size") stops at the shortest's length).
const PassRecord* exhaustedPartner(const RankTrace& t, const PassRecord& p) {
  if (p.batches.empty()) return nullptr;
  for (const auto& q : t.passes) {
    // Drawn from in turns with p: a batch of q after p's first (a loader run to its end before
    // p's first batch, Lightning's sanity check, is none).
    if (q.loader != p.loader && completePass(q) && !q.batches.empty() &&
        q.batches.back().line > p.batches.front().line &&
        q.batches.front().line < p.batches.back().line && q.endLine < p.endLine) {
      return &q;
    }
  }
  return nullptr;
}

// zip(a, b) asks a for its next batch before b: in the round where b runs out, a's batch was
// handed out and thrown away. That batch is the last line before b's StopIteration.
bool lastBatchDiscarded(const RankTrace& t, const PassRecord& p) {
  if (p.ended || p.batches.empty()) return false;
  const PassRecord* q = exhaustedPartner(t, p);
  return q && q->endLine == p.batches.back().line + 1;
}

}  // namespace

std::optional<std::vector<Index>> consumedIndices(const RankTrace& t, const PassRecord& p,
                                                  const std::optional<std::vector<Index>>& order) {
  std::vector<Index> out;
  std::int64_t taken = 0;
  const std::size_t used = p.batches.size() - (lastBatchDiscarded(t, p) ? 1 : 0);
  for (std::size_t k = 0; k < used; ++k) {
    const BatchRecord& b = p.batches[k];
    if (b.indices) {
      out.insert(out.end(), b.indices->begin(), b.indices->end());
    } else if (order && t.loaders.at(p.loader).torchBatching) {
      const auto begin = std::min<std::int64_t>(taken, static_cast<std::int64_t>(order->size()));
      const auto end = std::min<std::int64_t>(taken + b.size, static_cast<std::int64_t>(order->size()));
      out.insert(out.end(), order->begin() + begin, order->begin() + end);
    } else {
      return std::nullopt;
    }
    taken += b.size;
  }
  return out;
}

namespace {

// A pass that did not reach StopIteration is "dropped" unless it is the last, partial pass of a
// loader that is cycled: another loader's completed pass encloses it and this loader completed a
// pass inside that one too (every sample was seen in this epoch). Ranks that did not end normally
// are rank-failures, not drops.
bool isDropped(const RankTrace& t, const PassRecord& p) {
  if (p.ended || !t.endedNormally()) return false;
  for (const auto& q : t.passes) {
    if (q.loader == p.loader || !q.ended) continue;
    if (!(q.startLine < p.startLine && q.endLine > p.startLine)) continue;
    for (const auto& done : t.passes) {
      if (done.loader == p.loader && done.ended && done.startLine > q.startLine &&
          done.endLine < q.endLine) {
        return false;
      }
    }
  }
  return true;
}

Partition partitionOf(const std::vector<RankPass>& ranks, std::int64_t n, std::int64_t epoch,
                      bool consumed) {
  Partition part;
  part.datasetSize = n;
  part.epoch = epoch;
  for (const auto& rp : ranks) part.ranks.push_back(consumed ? *rp.consumed : *rp.order);
  return part;
}

// Findings of one property on one loader, over its epochs: the first is kept, the rest counted.
struct Finding {
  Violation first;
  int epochs = 0;
};

class DataChecker {
 public:
  DataChecker(const Trace& trace, std::vector<std::string>& notes, std::set<std::string>& judged)
      : trace_(trace), notes_(notes), judged_(judged) {}

  void run(std::vector<Violation>& out) {
    std::set<std::int64_t> loaders;
    for (const auto& t : trace_.ranks) {
      if (t) for (const auto& [id, l] : t->loaders) loaders.insert(id);
    }
    for (auto loader : loaders) {
      checkLoader(loader);
      checkAcrossEpochs(loader);
    }
    for (auto& [key, f] : findings_) {
      if (f.epochs > 1) f.first.detail += fmt::format(" (the same in {} epochs)", f.epochs);
      out.push_back(std::move(f.first));
    }
  }

 private:
  // Every rank's view of pass `iter` of `loader`, or empty when some rank has no such pass.
  std::vector<RankPass> passAcrossRanks(std::int64_t loader, std::int64_t iter) {
    std::vector<RankPass> out;
    for (const auto& t : trace_.ranks) {
      if (!t) return {};
      const PassRecord* p = t->findPass(loader, iter);
      if (!p) return {};
      RankPass rp;
      rp.trace = &*t;
      rp.pass = p;
      rp.order = samplerOrder(*t, *p, cache_);
      rp.consumed = consumedIndices(*t, *p, rp.order);
      rp.dropped = isDropped(*t, *p);
      out.push_back(std::move(rp));
    }
    return out;
  }

  void checkLoader(std::int64_t loader) {
    std::int64_t iters = 0;
    for (const auto& t : trace_.ranks) {
      if (!t) continue;
      for (const auto& p : t->passes) {
        if (p.loader == loader) iters = std::max(iters, p.iter + 1);
      }
    }
    std::vector<RankPass> previous;
    bool judged = false;
    for (std::int64_t k = 0; k < iters; ++k) {
      auto ranks = passAcrossRanks(loader, k);
      if (ranks.empty()) {
        if (!checkPassOnSomeRanks(loader, k)) break;
        judged = true;
        continue;
      }
      if (checkStream(loader, k, ranks)) {
        judged = true;
        continue;
      }
      judged = judged || allKnown(ranks, false);
      const bool partitionOk = checkPartition(loader, k, ranks);
      if (partitionOk && !previous.empty()) checkNewOrder(loader, previous, ranks);
      if (partitionOk) checkConsumed(loader, k, ranks);
      checkEvaluation(loader, k, ranks);
      previous = std::move(ranks);
    }
    const bool found = std::any_of(findings_.begin(), findings_.end(),
                                   [&](const auto& f) { return std::get<0>(f.first) == loader; });
    if (!judged && !found && iters > 0) {
      notes_.push_back(fmt::format(
          "{}: no epoch's partition could be checked (its sampler's order is known only from a "
          "pass run to its end on every rank)",
          describeLoader(*firstTrace(), loader)));
    }
  }

  // NOTE [Across epochs] (docs/audit.md): what only the loader's whole run shows, for a loader
  // whose epochs each look healthy (no finding of its own so far).
  void checkAcrossEpochs(std::int64_t loader) {
    for (const auto& [key, f] : findings_) {
      if (std::get<0>(key) == loader) return;
    }
    if (auto v = neverTrainedInAnyEpoch(trace_, loader, cache_)) {
      judged(property::kCoverage);
      record(loader, *v, "across-epochs");
    }
    if (auto v = replayedFromACache(trace_, loader)) {
      judged(property::kReshuffle);
      record(loader, *v, "across-epochs");
    }
  }

  // NOTE [A loader on some ranks only] (docs/audit.md): pass `iter` of `loader` on some ranks,
  // while every other rank ran to its end without ever iterating the loader (an evaluation under
  // `if rank == 0`). A sampler that splits the dataset across the world (DistributedSampler) then
  // leaves the other ranks' shards unread: coverage. One that does not split it is a single-rank
  // loop: a note. A rank that iterated the loader but fewer times (it stopped early) is the
  // collective checks' finding, and one that failed a rank-failure: not this. Returns whether the
  // pass was such a loop (judged or noted).
  bool checkPassOnSomeRanks(std::int64_t loader, std::int64_t iter) {
    std::vector<const RankTrace*> with;
    std::vector<std::int64_t> without;
    for (const auto& t : trace_.ranks) {
      if (!t) return false;
      if (t->findPass(loader, iter)) {
        with.push_back(&*t);
        continue;
      }
      const bool neverIterated =
          std::none_of(t->passes.begin(), t->passes.end(),
                       [&](const PassRecord& p) { return p.loader == loader; });
      if (!t->endedNormally() || !neverIterated) return false;
      without.push_back(t->rank);
    }
    if (with.empty() || without.empty()) return false;
    const RankTrace& first = *with.front();
    const SamplerRecord* s = samplerOf(first, loader);
    std::vector<std::int64_t> readers;
    for (const auto* t : with) readers.push_back(t->rank);
    if (!s || !s->numReplicas || *s->numReplicas < 2) {
      if (iter == 0) {
        notes_.push_back(
            fmt::format("{}: iterated on {} only, by a sampler that does not split "
                        "it across ranks: a single-rank loop, no partition to check",
                        describeLoader(first, loader), rankList(readers)));
      }
      return true;
    }
    const std::int64_t n = first.findPass(loader, iter)->datasetLen;
    std::set<Index> seen;
    for (const auto* t : with) {
      const PassRecord& p = *t->findPass(loader, iter);
      if (const auto consumed = consumedIndices(*t, p, samplerOrder(*t, p, cache_))) {
        seen.insert(consumed->begin(), consumed->end());
      }
    }
    Violation v;
    v.property = std::string(property::kCoverage);
    v.ranks = without;
    v.epoch = iter;
    const bool oneReader = readers.size() == 1, oneLeft = without.size() == 1;
    v.detail = fmt::format(
        "{}: sampler {} ({}) splits its {} samples across {} ranks, but only {} iterate{} it in "
        "pass {}: {} never read{} {} shard{}, so {} of the {} samples are never seen",
        describeLoader(first, loader), s->id, s->className, n, *s->numReplicas, rankList(readers),
        oneReader ? "s" : "", iter, rankList(without), oneLeft ? "s" : "",
        oneLeft ? "its" : "their", oneLeft ? "" : "s",
        seen.empty() ? std::string("most")
                     : std::to_string(n - static_cast<std::int64_t>(seen.size())),
        n);
    v.likelyCause = fmt::format(
        "a loader sharded across {} ranks (DistributedSampler) is iterated on {} only (an "
        "evaluation under `if rank == 0`); give that loop an unsharded loader (SequentialSampler), "
        "or evaluate on every rank and all_reduce the sums",
        *s->numReplicas, rankList(readers));
    judged(property::kCoverage);
    record(loader, v);
    return true;
  }

  const RankTrace* firstTrace() const {
    for (const auto& t : trace_.ranks) {
      if (t) return &*t;
    }
    return nullptr;
  }

  static bool allKnown(const std::vector<RankPass>& ranks, bool consumed) {
    return std::all_of(ranks.begin(), ranks.end(), [&](const RankPass& rp) {
      return consumed ? rp.consumed.has_value() : rp.order.has_value();
    });
  }

  std::optional<std::int64_t> commonDatasetLen(std::int64_t loader, std::int64_t k,
                                               const std::vector<RankPass>& ranks) {
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
    v.likelyCause = differentDataCause("length");
    record(loader, v);
    return std::nullopt;
  }

  // Ranks whose datasets list the same samples in different orders: index i is another sample on
  // each, however well the sampler splits the indices.
  bool sameListing(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
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
    const bool split = attribute == "subset-indices" || attribute == "subset";
    if (attribute == "subset-indices" && !promisesOneDataset(s)) return false;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> sides(byListing.begin(), byListing.end());
    std::sort(sides.begin(), sides.end(), [](const auto& a, const auto& b) {  // most ranks, then rank 0 first
      return a.second.size() != b.second.size() ? a.second.size() > b.second.size()
                                                : a.second.front() < b.second.front();
    });
    // The fingerprints are hashes: name the orders A, B, … and the attribute they were read from.
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < sides.size(); ++i) {
      parts.push_back(fmt::format("{} in order {}", rankList(sides[i].second),
                                  static_cast<char>('A' + std::min<std::size_t>(i, 25))));
    }
    Violation v;
    v.property = std::string(property::kCoverage);
    v.epoch = k;
    if (split) {
      v.detail = fmt::format("{}: the ranks' datasets are different Subsets of their base dataset "
                             "(their indices differ: {}), so the ranks' shards do not split one "
                             "dataset: samples one rank trains on are left out, or held out for "
                             "validation, on another",
                             describeLoader(*ranks[0].trace, loader), fmt::join(parts, "; "));
      v.likelyCause = "each rank splits the dataset with its own random state (random_split or a "
                      "shuffled index list after a per-rank seed such as torch.manual_seed(rank)); "
                      "split with a generator seeded alike on every rank: random_split(dataset, "
                      "lengths, generator=torch.Generator().manual_seed(0)), or split once and "
                      "share the indices";
    } else {
      v.detail = fmt::format("{}: the ranks' datasets list their samples in different orders (their "
                             "`{}`: {}), so an index names a different sample on each rank and the "
                             "shards overlap and leave samples out, however the sampler splits the "
                             "indices",
                             describeLoader(*ranks[0].trace, loader), attribute, fmt::join(parts, "; "));
      v.likelyCause = "each rank lists its files itself (os.listdir and glob give no defined order, "
                      "and nodes differ); sort the listing (sorted(os.listdir(root))) or build it "
                      "once and share it";
    }
    record(loader, v, "listing");
    return false;
  }

  // Whether every rank's loader holds one dataset: its parts, length, listing and items. Under a
  // sampler that promises to split one dataset, a difference is a coverage finding naming it;
  // under another, each rank's own dataset is by design and no partition across ranks is judged.
  bool sameDataset(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    std::vector<const RankTrace*> traces;
    for (const auto& rp : ranks) traces.push_back(rp.trace);
    if (auto v = differentComposition(traces, loader)) return differentData(loader, k, ranks, *v);
    if (!commonDatasetLen(loader, k, ranks)) return false;
    if (!sameListing(loader, k, ranks)) return false;
    if (auto v = differentItems(traces, loader)) return differentData(loader, k, ranks, *v);
    return true;
  }

  bool differentData(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks,
                     Violation v) {
    if (promisesOneDataset(samplerOf(*ranks[0].trace, loader))) {
      v.epoch = k;
      record(loader, v, "listing");
    } else {
      notApplicable(loader, fmt::format("the ranks hold different datasets under {}, which does "
                                        "not split one dataset across ranks: each rank's data is "
                                        "its own, and no partition across ranks is judged",
                                        samplerClass(ranks[0])));
    }
    return false;
  }

  // NOTE [A job that begins at a later epoch] (docs/audit.md, "A run of several jobs"): the
  // loader's first pass drew its order with a sampler epoch above 0 (set_epoch(e) before any pass):
  // the job resumed a run, and a sampler of its own may start inside that epoch. What it left
  // out of the epoch is the earlier job's to have trained: a note here, judged with --resumes.
  static bool beganAtALaterEpoch(std::int64_t k, const std::vector<RankPass>& ranks) {
    return k == 0 && std::all_of(ranks.begin(), ranks.end(), [](const RankPass& rp) {
             return rp.pass->samplerEpoch.value_or(0) > 0;
           });
  }

  // NOTE [Padding with whole batches] (docs/audit.md, "Healthy counterparts"): a batch sampler of
  // the user's own that deals whole batches to the ranks pads the last ones with copies of batches
  // drawn earlier (DistributedSampler's padding, a batch at a time), so that every rank takes as
  // many steps. It is that when the ranks drew equal numbers of batches, the copies are some ranks'
  // last batches (fewer than W), and the other batches hold every sample exactly once. Returns how
  // many ranks end with such a copy, or nothing.
  static std::optional<std::size_t> batchesPaddedWithCopies(const std::vector<RankPass>& ranks,
                                                            std::int64_t n) {
    const std::size_t count = ranks[0].pass->batches.size();
    std::map<std::vector<Index>, int> drawn;
    for (const auto& rp : ranks) {
      if (rp.pass->batches.size() != count || count == 0) return std::nullopt;
      for (const auto& b : rp.pass->batches) {
        if (!b.indices) return std::nullopt;
        ++drawn[*b.indices];
      }
    }
    std::size_t padded = 0;
    for (const auto& rp : ranks) {
      auto& last = drawn[*rp.pass->batches.back().indices];
      if (last > 1) {
        --last;
        ++padded;
      }
    }
    if (padded == 0 || padded >= ranks.size()) return std::nullopt;
    std::vector<int> seen(static_cast<std::size_t>(n), 0);
    std::int64_t total = 0;
    for (const auto& [batch, times] : drawn) {
      for (Index i : batch) {
        if (i < 0 || i >= n) return std::nullopt;
        seen[static_cast<std::size_t>(i)] += times;
        total += times;
      }
    }
    const bool once = total == n && std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; });
    return once ? std::optional<std::size_t>(padded) : std::nullopt;
  }

  bool checkPartition(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    if (!sameDataset(loader, k, ranks)) {
      checkSharedOwnData(loader, k, ranks);
      return false;
    }
    const std::optional<std::int64_t> n = ranks[0].pass->datasetLen;
    if (!allKnown(ranks, false)) return true;
    if (samplerOverAnotherLength(loader, k, ranks)) return false;
    const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
    std::vector<std::optional<std::vector<Index>>> orders;
    for (const auto& rp : ranks) orders.push_back(rp.order);
    if (drawsWithReplacement(s) || repeatsWithinARank(s, orders, *n)) {
      checkDrawsDiffer(loader, k, *n, ranks);
      return false;  // coverage, disjointness and reshuffle do not apply
    }
    Expectations e;
    e.dropLast = ranks[0].pass->dropLast.value_or(s && s->dropLast.value_or(false));
    // NOTE [drop_last that drops everything] (core/scenario/src/epoch_checks.cpp): drop_last may
    // drop the N % W tail; when that is the whole dataset the epoch trains on nothing.
    const auto world = static_cast<std::int64_t>(ranks.size());
    const bool dropsEverything =
        e.dropLast && *n > 0 && distributedNumSamples(*n, world, true) == 0;
    if (dropsEverything) e.dropLast = false;
    const Partition part = partitionOf(ranks, *n, k, false);
    for (auto p : {property::kValidRange, property::kCoverage, property::kDisjointness}) judged(p);
    auto v = checkValidRange(part);
    if (!v) v = checkCoverage(part, e);
    if (!v) v = checkDisjointness(part, e);
    if (!v) return true;
    if (v->property == property::kDisjointness && s && s->order == OrderKind::kRecorded) {
      if (const auto padded = batchesPaddedWithCopies(ranks, *n)) {
        notApplicable(loader, fmt::format(
            "{}: {} of the {} ranks end each epoch with a copy of a batch drawn earlier in it: "
            "padding to equal step counts, as DistributedSampler pads (every other sample drawn "
            "once)",
            samplerName(ranks[0]), *padded, ranks.size()));
        return true;
      }
    }
    if (v->property == property::kCoverage && beganAtALaterEpoch(k, ranks)) {
      const std::int64_t drawn = static_cast<std::int64_t>(
          std::set<Index>(part.ranks[0].begin(), part.ranks[0].end()).size());
      notApplicable(loader, fmt::format(
          "the job began at epoch {} and its first pass drew part of it (rank 0: {} samples): a "
          "job resumed mid-epoch from a checkpoint, the epoch's rest trained by the job before it; "
          "audit them together to judge it (ddp-sim launch --audit --resumes EARLIER_TRACE_DIR, "
          "or ddp-sim audit EARLIER_TRACE_DIR THIS_TRACE_DIR)",
          *ranks[0].pass->samplerEpoch, drawn));
      return false;
    }
    v->detail = fmt::format("{}, {}: {}", describeLoader(*ranks[0].trace, loader),
                            samplerName(ranks[0]), v->detail);
    v->likelyCause =
        dropsEverything ? fmt::format(
                              "DistributedSampler(drop_last=True) with N = {} < W = {} gives "
                              "num_samples = 0: no rank gets a sample, so every pass over it draws "
                              "nothing; use fewer ranks or drop_last=False",
                              *n, world)
                        : partitionCause(ranks, v->property, v->ranks, interpreterOf(trace_));
    record(loader, *v);
    return false;
  }

  // NOTE [Ranks that share a dataset of their own]: under a sampler that does not split one
  // dataset, each rank's data is its own; some ranks holding the same data train on it twice.
  void checkSharedOwnData(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    if (promisesOneDataset(samplerOf(*ranks[0].trace, loader))) return;
    std::vector<const RankTrace*> traces;
    for (const auto& rp : ranks) traces.push_back(rp.trace);
    if (auto v = sharedOwnDatasets(traces, loader)) {
      judged(property::kDisjointness);
      v->epoch = k;
      record(loader, *v, "own-data");
      return;
    }
    const bool training = std::any_of(ranks[0].pass->batches.begin(), ranks[0].pass->batches.end(),
                                      [](const BatchRecord& b) { return b.grad; });
    if (!training) return;  // a validation Subset per rank is no evaluation across ranks
    if (auto v = overlappingSubsets(traces, loader)) {
      judged(property::kCoverage);
      v->epoch = k;
      record(loader, *v, "own-data");
    }
  }

  // A sampler made for another dataset than its loader's (a copied line that passes the training
  // set's sampler to the evaluation loader): it draws indices of its own length, so a longer
  // dataset's tail is never drawn on any rank (coverage), a shorter one's indices run past it.
  bool samplerOverAnotherLength(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
    const std::optional<std::int64_t> drawn = ranks[0].pass->datasetLen;
    if (l.datasetLen <= 0 || !drawn || *drawn <= 0 || *drawn == l.datasetLen) return false;
    const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
    std::optional<std::int64_t> owner;  // the loader whose dataset the sampler was made for
    for (const auto& [id, other] : ranks[0].trace->loaders) {
      if (id != loader && s && other.sampler == s->id && other.datasetLen == *drawn) owner = id;
    }
    const std::string alsoUsedBy =
        owner ? fmt::format(", the sampler of {} too", describeLoader(*ranks[0].trace, *owner)) : "";
    Violation v;
    v.property = std::string(*drawn < l.datasetLen ? property::kCoverage : property::kValidRange);
    v.epoch = k;
    v.detail = fmt::format(
        "{}: {} was built over {} samples{}, so it draws indices 0..{} only: {}",
        describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]), *drawn, alsoUsedBy, *drawn - 1,
        *drawn < l.datasetLen
            ? fmt::format("{} of the loader's {} samples ({}..{}) are on no rank", l.datasetLen - *drawn,
                          l.datasetLen, *drawn, l.datasetLen - 1)
            : fmt::format("indices {}..{} are past the loader's {} samples", l.datasetLen, *drawn - 1,
                          l.datasetLen));
    v.likelyCause = fmt::format(
        "the loader was given a sampler made for another dataset{}; build a sampler over the "
        "loader's own dataset (DistributedSampler(dataset, shuffle=False) for an evaluation)",
        owner ? fmt::format(" (loader {}'s)", *owner) : "");
    judged(property::kCoverage);
    record(loader, v);
    return true;
  }

  // NOTE [Data with no sampler indices] (docs/audit.md): a pass over an iterable dataset is known
  // by its batches' content fingerprints. Ranks that consumed the same batches train on the same
  // samples (disjointness); batches repeated within one rank's pass come from its workers, each
  // yielding the whole stream. Returns whether the pass was such a pass (judged here).
  bool checkStream(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    for (const auto& rp : ranks) {
      if (rp.pass->batches.empty()) return false;
      for (const auto& b : rp.pass->batches) {
        if (b.fingerprint.empty()) return false;
      }
    }
    // Each rank's batches, and who else consumed each of them.
    std::map<std::string, std::set<std::int64_t>> holders;
    std::vector<std::int64_t> withRepeats;
    std::int64_t repeated = 0;
    for (const auto& rp : ranks) {
      std::set<std::string> own;
      for (const auto& b : rp.pass->batches) {
        if (!own.insert(b.fingerprint).second) ++repeated;
        holders[b.fingerprint].insert(rp.trace->rank);
      }
      if (own.size() < rp.pass->batches.size()) withRepeats.push_back(rp.trace->rank);
    }
    std::int64_t shared = 0, total = 0;
    std::set<std::int64_t> sharing;
    for (const auto& rp : ranks) {
      for (const auto& b : rp.pass->batches) {
        ++total;
        const auto& h = holders.at(b.fingerprint);
        if (h.size() > 1) {
          ++shared;
          sharing.insert(h.begin(), h.end());
        }
      }
    }
    const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
    judged(property::kDisjointness);
    judged(property::kNoDuplicates);
    // More than half of the batches on more than one rank: not a coincidence of equal samples.
    if (shared * 2 > total && sharing.size() > 1) {
      Violation v;
      v.property = std::string(property::kDisjointness);
      v.epoch = k;
      v.ranks.assign(sharing.begin(), sharing.end());
      v.detail = fmt::format("{}: {} consumed the same batches, "
                             "{} of the {} batches of this epoch are on more than one rank (by "
                             "their content's fingerprint)",
                             describeLoader(*ranks[0].trace, loader), rankList(v.ranks), shared,
                             total);
      v.likelyCause = fmt::format(
          "the IterableDataset yields the same stream on every rank, and no sampler splits an "
          "iterable dataset: shard it in __iter__ by rank (itertools.islice(stream, rank, None, "
          "world_size)){}",
          l.numWorkers > 0 ? ", and by worker too (torch.utils.data.get_worker_info())" : "");
      record(loader, v, "stream");
    } else if (!withRepeats.empty() && l.numWorkers > 0) {
      Violation v;
      v.property = std::string(property::kNoDuplicates);
      v.epoch = k;
      v.ranks = withRepeats;
      v.detail = fmt::format("{}, {} worker processes: {} consumed {} batches twice or more in "
                             "one epoch (by their content's fingerprint)",
                             describeLoader(*ranks[0].trace, loader), l.numWorkers,
                             rankList(withRepeats), repeated);
      v.likelyCause =
          "every DataLoader worker runs the IterableDataset's whole __iter__, so each worker yields "
          "the same stream; shard it by worker in __iter__ with torch.utils.data.get_worker_info() "
          "(info.id, info.num_workers), on top of the shard by rank";
      record(loader, v, "stream");
    }
    return true;
  }

  // The `with-replacement` contract: each rank draws its own indices; ranks that drew the same
  // ones (the same generator seed on every rank) train on the same samples.
  void checkDrawsDiffer(std::int64_t loader, std::int64_t k, std::int64_t n,
                        const std::vector<RankPass>& ranks) {
    notApplicable(loader, fmt::format("{} draws with replacement: coverage, disjointness and "
                                      "reshuffle do not apply; judged by ranks-agree",
                                      samplerName(ranks[0])));
    const Partition part = partitionOf(ranks, n, k, false);
    judged(property::kValidRange);
    judged(property::kRanksAgree);
    auto v = checkRanksAgree(part);
    if (!v) return;
    std::map<std::vector<Index>, std::vector<std::int64_t>> byDraw;
    for (const auto& rp : ranks) byDraw[*rp.order].push_back(rp.trace->rank);
    std::vector<std::int64_t> same;
    for (const auto& [draw, rs] : byDraw) {
      if (rs.size() > same.size()) same = rs;
    }
    v->ranks = same;
    v->detail = fmt::format("{}, {}: {} drew the same {} indices in this epoch, so they train on "
                            "the same samples",
                            describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]),
                            rankList(same), ranks[0].order->size());
    v->likelyCause = fmt::format(
        "{} draws with replacement from a generator seeded alike on every rank (or the global "
        "seed, set alike); give each rank its own draw: a generator seeded with seed + rank, or "
        "one draw of world_size x num_samples indices shared by all and indices[rank::world_size]",
        samplerClass(ranks[0]));
    record(loader, *v);
  }

  void notApplicable(std::int64_t loader, const std::string& why) {
    const std::string note = fmt::format("{}: {}", describeLoader(*firstTrace(), loader), why);
    if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
  }

  static std::string samplerClass(const RankPass& rp) {
    const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
    if (!s) return "its sampler";
    const auto dot = s->className.rfind('.');
    return dot == std::string::npos ? s->className : s->className.substr(dot + 1);
  }

  // Why ranks' orders do not split one dataset, from what the samplers say about themselves.
  // `named`: the ranks the finding names (a cause about some ranks names those first).
  static std::string partitionCause(const std::vector<RankPass>& ranks, const std::string& property,
                                    const std::vector<std::int64_t>& named,
                                    const std::string& interpreter) {
    std::set<std::int64_t> seeds, replicas, samplerRanks;
    for (const auto& rp : ranks) {
      if (rp.pass->seed) seeds.insert(*rp.pass->seed);
      if (rp.pass->numReplicas) replicas.insert(*rp.pass->numReplicas);
      if (rp.pass->rank) samplerRanks.insert(*rp.pass->rank);
    }
    const auto w = static_cast<std::int64_t>(ranks.size());
    if (isWholeDatasetSampler(samplerOf(*ranks[0].trace, ranks[0].pass->loader))) {
      const std::string lightning = frameworkHint(
          *ranks[0].trace,
          "Trainer(use_distributed_sampler=False) leaves the loader's sampler as it is, so ");
      if (!lightning.empty()) {
        return fmt::format(
            "the loader has no DistributedSampler: {}its {} draws from the whole dataset on every "
            "rank, the ranks train on the same samples and an epoch is {} epochs' work; drop "
            "use_distributed_sampler=False (Lightning then puts a DistributedSampler under the "
            "loader and sets its epoch), or give the loader a DistributedSampler yourself",
            lightning, samplerClass(ranks[0]), w);
      }
      return fmt::format(
          "the loader has no DistributedSampler: its {} (what DataLoader(shuffle=True) or "
          "DataLoader() makes) draws from the whole dataset on every rank, so the ranks train on "
          "the same samples and an epoch is {} epochs' work; pass "
          "sampler=DistributedSampler(dataset) with shuffle=False on the loader, and call "
          "sampler.set_epoch(epoch) every epoch",
          samplerClass(ranks[0]), w);
    }
    if (seeds.size() > 1) {
      return fmt::format("the ranks' samplers have different seeds ({}), so each shuffles its own "
                         "order and their shards overlap and leave samples out; give every rank "
                         "the same seed",
                         fmt::join(seeds, ", "));
    }
    if (const auto onNodes = nodeCause(ranks, named)) return *onNodes;
    if (!replicas.empty() && (replicas.size() > 1 || *replicas.begin() != w)) {
      return fmt::format("the samplers' num_replicas ({}) is not the world size {}; pass "
                         "num_replicas=world_size (or leave it to the default)",
                         fmt::join(replicas, ", "), w);
    }
    if (!samplerRanks.empty() && static_cast<std::int64_t>(samplerRanks.size()) != w) {
      return "several ranks give their sampler the same rank; pass rank=dist.get_rank()";
    }
    return splitCandidates(ranks, property, seeds, interpreter);
  }

  // The samplers' rank or num_replicas are their node's (LOCAL_RANK, LOCAL_WORLD_SIZE).
  static std::optional<std::string> nodeCause(const std::vector<RankPass>& ranks,
                                              const std::vector<std::int64_t>& named) {
    const SamplerRecord* s = samplerOf(*ranks[0].trace, ranks[0].pass->loader);
    if (!s) return std::nullopt;
    std::vector<SamplerOnRank> samplers;
    for (const auto& rp : ranks) samplers.push_back({rp.trace, rp.pass->rank, rp.pass->numReplicas});
    return nodeTopologyCause(samplers, s->id, named);
  }

  // The sampler's own parameters agree: say what is known and list what remains, never the
  // catalogue's "seed every rank identically" (their seeds may well agree already).
  static std::string splitCandidates(const std::vector<RankPass>& ranks, const std::string& property,
                                     const std::set<std::int64_t>& seeds,
                                     const std::string& interpreter) {
    const SamplerRecord* s = samplerOf(*ranks[0].trace, ranks[0].pass->loader);
    const LoaderRecord& l = ranks[0].trace->loaders.at(ranks[0].pass->loader);
    if (s && s->datasetLen > 0 && l.datasetLen > 0 && s->datasetLen != l.datasetLen) {
      return fmt::format("{} was built over {} samples but its loader's dataset has {}: a sampler "
                         "made for another dataset (the training set's sampler on another "
                         "loader, or a dataset changed after the sampler was made); build the "
                         "sampler over the loader's own dataset",
                         samplerClass(ranks[0]), s->datasetLen, l.datasetLen);
    }
    std::vector<std::string> known;
    if (!s || s->order != OrderKind::kTorchDistributed) {
      known.push_back(fmt::format("{} is not torch's DistributedSampler", samplerClass(ranks[0])));
    }
    if (seeds.size() == 1) known.push_back(fmt::format("its ranks share one seed ({})", *seeds.begin()));
    const std::string candidates =
        property == property::kDisjointness
            ? "a shard length or offset by rank that reaches into the next rank's part, padding "
              "taken from other ranks' parts, rank ignored (every rank iterating the whole "
              "order), or a random state that differs per rank (a generator not seeded from the "
              "sampler's seed, the global one after a per-rank seed)"
        : property == property::kCoverage
            ? "a split that rounds N / W down and drops the rest, an offset by rank that skips "
              "indices, or a random state that differs per rank (a generator not seeded from the "
              "sampler's seed, the global one after a per-rank seed)"
            : "padding or wrap-around computed with another length than the dataset's";
    return fmt::format(
        "{}; the trace cannot single out where its split goes wrong, candidates: {}; check the "
        "sampler on its own: ddp-sim check-sampler -- {} -m ddph_audit.serve_sampler {} "
        "(built as DistributedSampler is, with num_replicas, rank and seed), which shrinks a "
        "failure to a minimal request",
        known.empty() ? "the samplers' own parameters agree" : fmt::format("{}", fmt::join(known, ", ")),
        candidates, sampler::shellQuote(interpreter), serveSpec(ranks[0]));
  }

  // What serve_sampler takes for the sampler's class: "train.py:ShardSampler" for a class of the
  // program's script, "package.module:Class" for one it imports.
  static std::string serveSpec(const RankPass& rp) {
    const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
    const std::string name = s ? s->className : "";
    const auto dot = name.rfind('.');
    if (dot == std::string::npos) return "module:Class";
    const std::string module = name.substr(0, dot), cls = name.substr(dot + 1);
    if (module != "__main__") return module + ":" + cls;
    const auto& argv = rp.trace->argv;
    const bool script = !argv.empty() && argv[0].size() > 3 &&
                        argv[0].compare(argv[0].size() - 3, 3, ".py") == 0;
    return (script ? argv[0] : std::string("script.py")) + ":" + cls;
  }

  static std::string samplerName(const RankPass& rp) {
    const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
    if (!s) return "its sampler";
    return fmt::format("sampler {} ({})", s->id, s->className);
  }

  // A set_epoch call on `s` made while pass `p` ran (after its iter()), to a value that is not the
  // epoch its order was drawn with: it came too late for this pass.
  static const SetEpochCall* setEpochInside(const SamplerRecord& s, const PassRecord& p) {
    for (const auto& c : s.setEpochCalls) {
      if (c.line > p.startLine && c.line < p.endLine && c.epoch != p.samplerEpoch.value_or(c.epoch))
        return &c;
    }
    return nullptr;
  }

  // A sampler whose set_epoch was called and that no loader draws from, or null.
  static const SamplerRecord* unusedSamplerWithEpochs(const RankTrace& t) {
    for (const auto& [id, s] : t.samplers) {
      if (s.setEpochCalls.empty()) continue;
      // A named copy: a lambda may not capture a structured binding before C++20.
      const auto samplerId = id;
      const bool used = std::any_of(t.loaders.begin(), t.loaders.end(), [&](const auto& l) {
        return l.second.sampler == samplerId;
      });
      if (!used) return &s;
    }
    return nullptr;
  }

  // NOTE [A loader cycled inside an epoch] (docs/audit.md, "Across epochs"): the shorter loader
  // of two trained together is restarted when it runs out (Lightning's CombinedLoader
  // max_size_cycle, a hand-written cycle), inside one pass of the longer one: its restarts are
  // not epochs, and the same order again within one epoch is how its sampler was asked (its epoch
  // is set once an epoch). Its reshuffle is judged across the longer loader's epochs.
  static bool restartedInsideOnePass(const RankTrace& t, const PassRecord& a, const PassRecord& b) {
    return std::any_of(t.passes.begin(), t.passes.end(), [&](const PassRecord& q) {
      return q.loader != a.loader && a.endLine > q.startLine && q.startLine < b.startLine &&
             b.startLine < q.endLine &&
             std::any_of(q.batches.begin(), q.batches.end(),
                         [](const BatchRecord& x) { return x.grad; });
    });
  }

  void checkNewOrder(std::int64_t loader, const std::vector<RankPass>& before,
                      const std::vector<RankPass>& after) {
    // The order of an evaluation does not matter: the same order every epoch harms nothing.
    if (isEvaluation(*before[0].pass) || isEvaluation(*after[0].pass)) return;
    if (!allKnown(before, false) || !allKnown(after, false)) return;
    if (restartedInsideOnePass(*before[0].trace, *before[0].pass, *after[0].pass)) return;
    const SamplerRecord* s = samplerOf(*before[0].trace, loader);
    const auto shuffle = before[0].pass->shuffle ? before[0].pass->shuffle
                                                 : (s ? s->shuffle : std::nullopt);
    const bool epochsSet = s && !s->setEpochCalls.empty();
    if (!(shuffle.value_or(false) || (!shuffle && epochsSet))) return;
    Expectations e;
    e.shuffle = true;
    judged(property::kReshuffle);
    const std::int64_t k = before[0].pass->iter;
    const Partition a = partitionOf(before, before[0].pass->datasetLen, k, false);
    const Partition b = partitionOf(after, after[0].pass->datasetLen, k + 1, false);
    auto v = ddph::sampler::checkReshuffle(a, b, e);
    if (!v) return;
    const auto e0 = before[0].pass->samplerEpoch, e1 = after[0].pass->samplerEpoch;
    std::string why;
    if (const SamplerRecord* other = s && s->setEpochCalls.empty() ? unusedSamplerWithEpochs(*before[0].trace)
                                                                     : nullptr) {
      why = fmt::format("set_epoch is never called on {}, but on sampler {} ({}), which no loader "
                        "draws from",
                        samplerName(before[0]), other->id, other->className);
      v->likelyCause = "set_epoch(epoch) is called on another sampler than the one this DataLoader "
                       "draws from (a second sampler made for the same data, or a name rebound "
                       "after the loader was built); call set_epoch on the loader's own sampler "
                       "(loader.sampler.set_epoch(epoch))";
    } else if (s && s->setEpochCalls.empty()) {
      why = fmt::format("set_epoch is never called on {}", samplerName(before[0]));
      v->likelyCause = "set_epoch(epoch) is not called before each epoch, so every epoch repeats "
                       "epoch 0's order; call sampler.set_epoch(epoch) at the start of every epoch";
    } else if (const SetEpochCall* late = s ? setEpochInside(*s, *after[0].pass) : nullptr;
               late && e1) {
      const LoaderRecord& l = after[0].trace->loaders.at(loader);
      why = fmt::format("set_epoch({}) was called after iter(loader) had begun epoch {}, whose "
                        "order was drawn with epoch {}",
                        late->epoch, k + 1, *e1);
      v->likelyCause = fmt::format(
          "set_epoch(epoch) runs after the epoch's iterator was made{}, so each epoch is drawn "
          "with the previous epoch's value; call sampler.set_epoch(epoch) before iter(loader) "
          "(before the for loop over the loader)",
          l.numWorkers > 0
              ? fmt::format(" and its {} worker processes were handed their first indices "
                            "inside iter() (DataLoader prefetches)",
                            l.numWorkers)
              : " and its first batch drawn");
    } else if (e0 && e1 && *e0 == *e1) {
      why = fmt::format("set_epoch({}) was in force for both epochs", *e0);
      v->likelyCause = "set_epoch is called with the same value every epoch (e.g. a constant or "
                       "the wrong variable); pass the epoch number";
    } else if (e0 && e1) {
      why = fmt::format("the sampler's epoch went from {} to {} but its order did not change", *e0,
                        *e1);
      v->likelyCause = "the sampler ignores its epoch: seed its generator with seed + epoch";
    } else {
      why = s ? fmt::format("set_epoch was called {} times on {}, and the trace has no epoch of "
                            "the sampler at each pass",
                            s->setEpochCalls.size(), samplerName(before[0]))
              : "";
      v->likelyCause =
          "the epoch does not reach the sampler's order, and the trace cannot tell why: the "
          "sampler may not use the epoch it is given (seed its generator with seed + epoch), "
          "set_epoch may run after the epoch's iterator drew its order (call it before "
          "iter(loader)), or it may be called with the same value each time (pass the epoch)";
    }
    v->detail = fmt::format("{}: {}{}", describeLoader(*before[0].trace, loader), v->detail,
                            why.empty() ? "" : "; " + why);
    record(loader, *v);
  }

  // NOTE [A batch budget] (docs/audit.md, "A run that ends inside a pass"): every training pass of
  // the loader, on every rank, handed out the same number of batches, fewer than the pass holds,
  // and was left (limit_train_batches, a steps-per-epoch cap; the last may be shorter: max_steps),
  // while its sampler drew a new order each epoch. Each epoch leaves other samples out by design:
  // a note. With the same order every epoch the same samples are never trained: coverage.
  bool everyPassCutAlike(std::int64_t loader, const std::vector<RankPass>& ranks) const {
    for (const auto& rp : ranks) {
      std::vector<const PassRecord*> passes;
      for (const auto& p : rp.trace->passes) {
        if (p.loader == loader && std::any_of(p.batches.begin(), p.batches.end(),
                                              [](const BatchRecord& b) { return b.grad; }))
          passes.push_back(&p);
      }
      if (passes.size() < 2) return false;  // one cut pass: the run (or a trial) ended inside it
      const std::size_t budget = passes.front()->batches.size();
      std::set<std::int64_t> epochs;
      for (std::size_t i = 0; i < passes.size(); ++i) {
        const PassRecord& p = *passes[i];
        const bool last = i + 1 == passes.size();
        if (completePass(p) || p.batches.empty() || (!last && p.batches.size() != budget) ||
            p.batches.size() > budget || !p.shuffle.value_or(false))
          return false;
        epochs.insert(p.samplerEpoch.value_or(0));
      }
      if (epochs.size() != passes.size()) return false;  // an order repeated: the same samples
    }
    return true;
  }

  void checkConsumed(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    const bool anyDropped = std::any_of(ranks.begin(), ranks.end(),
                                        [](const RankPass& rp) { return rp.dropped; });
    if (!anyDropped || !allKnown(ranks, true) || !allKnown(ranks, false)) return;
    const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
    const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
    Expectations e;
    e.dropLast = ranks[0].pass->dropLast.value_or(s && s->dropLast.value_or(false));
    Partition consumed = partitionOf(ranks, ranks[0].pass->datasetLen, k, true);
    // A loader's own drop_last leaves each rank's last partial batch out by design.
    if (l.dropLast && l.batchSize > 0) {
      for (std::size_t r = 0; r < ranks.size(); ++r) {
        if (!ranks[r].dropped) continue;
        const auto full = static_cast<std::int64_t>(ranks[r].order->size()) / l.batchSize * l.batchSize;
        if (static_cast<std::int64_t>(consumed.ranks[r].size()) >= full) return;
      }
    }
    auto v = checkCoverage(consumed, e);
    if (!v) return;
    std::int64_t seen = 0;
    {
      std::set<Index> distinct;
      for (const auto& shard : consumed.ranks) distinct.insert(shard.begin(), shard.end());
      seen = static_cast<std::int64_t>(distinct.size());
    }
    std::vector<std::string> took;
    std::map<std::string, std::vector<std::int64_t>> byCount;
    for (const auto& rp : ranks) {
      const auto batches = static_cast<std::int64_t>(rp.pass->batches.size()) -
                           (lastBatchDiscarded(*rp.trace, *rp.pass) ? 1 : 0);
      const std::string of = rp.pass->declaredBatches
                                 ? fmt::format("{} of {} batches", batches, *rp.pass->declaredBatches)
                                 : fmt::format("{} batches", batches);
      byCount[of].push_back(rp.trace->rank);
    }
    for (const auto& [of, rs] : byCount) took.push_back(fmt::format("{} used {}", rankList(rs), of));
    const RankPass& dropped = *std::find_if(ranks.begin(), ranks.end(),
                                            [](const RankPass& rp) { return rp.dropped; });
    const PassRecord* partnerPass = exhaustedPartner(*dropped.trace, *dropped.pass);
    const std::int64_t partner = partnerPass ? partnerPass->loader : -1;
    if (partner < 0 && everyPassCutAlike(loader, ranks)) {
      notApplicable(loader, fmt::format(
          "every training pass was cut at {} of its {} batches on every rank (a batch budget: "
          "limit_train_batches, a steps-per-epoch cap, a break after N steps), and its sampler "
          "draws a new order every epoch, so other samples are left out each time; the samples "
          "no epoch reached are not judged",
          ranks[0].pass->batches.size(),
          ranks[0].pass->declaredBatches ? std::to_string(*ranks[0].pass->declaredBatches)
                                         : std::string("(len unknown)")));
      return;
    }
    if (partner < 0 && std::all_of(ranks.begin(), ranks.end(), [](const RankPass& rp) {
          return runEndsInside(*rp.trace, *rp.pass);
        })) {
      notApplicable(loader, fmt::format(
          "the run ended inside epoch {} ({}): a step budget (max_steps, a time limit) or a job "
          "stopped to be resumed; the {} samples it did not reach are not judged, since no later "
          "epoch of this run could have trained them (each job is audited alone: a resumed job's "
          "first epoch is not checked against this one)",
          k, fmt::join(took, "; "), consumed.datasetSize - seen));
      return;
    }
    v->detail = fmt::format(
        "{}: only {} of its {} samples were consumed in this epoch, the pass was dropped before "
        "its end{} ({}); {}",
        describeLoader(*ranks[0].trace, loader), seen, consumed.datasetSize,
        partner >= 0 ? fmt::format(" when {} ran out", describeLoader(*dropped.trace, partner)) : "",
        fmt::join(took, "; "), v->detail);
    v->ranks.clear();
    v->likelyCause =
        partner >= 0
            ? "zip() over loaders of different lengths stops at the shortest, so the longer "
              "loaders' remaining batches are never drawn; cycle the shorter loader (iterate it "
              "again, with its own set_epoch) or sample the concatenated datasets"
            : "the loop leaves the loader before its end (break, islice, a step limit), so the "
              "rest of the epoch's samples are never seen; if that is meant, mind that the "
              "skipped samples are the same on every run with the same seed";
    record(loader, *v, "consumed");
  }

  // Ranks whose loaders hold datasets of their own (a Subset per rank, a shard file each: their
  // listings, rows or parts differ) under a sampler that does not split one dataset: an index
  // names another sample on each rank, so their indices are not one dataset's.
  bool eachRankItsOwnDataset(std::int64_t loader, const std::vector<RankPass>& ranks) const {
    if (promisesOneDataset(samplerOf(*ranks[0].trace, loader))) return false;
    const std::string first = datasetIdentity(ranks[0].trace->loaders.at(loader));
    return std::any_of(ranks.begin(), ranks.end(), [&](const RankPass& rp) {
      return datasetIdentity(rp.trace->loaders.at(loader)) != first;
    });
  }

  // An evaluation pass scores every sample: samples no rank evaluated (DistributedSampler's
  // drop_last cutting N to a multiple of W) are left out of the metric. Reported under coverage.
  void checkEvaluatedOnce(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks,
                          const Partition& consumed) {
    std::set<Index> distinct;
    for (const auto& shard : consumed.ranks) distinct.insert(shard.begin(), shard.end());
    const auto missing = consumed.datasetSize - static_cast<std::int64_t>(distinct.size());
    if (missing <= 0) return;
    std::vector<Index> never;
    for (Index i = 0; i < consumed.datasetSize && never.size() < 8; ++i) {
      if (!distinct.count(i)) never.push_back(i);
    }
    const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
    const bool cut = s && s->order == OrderKind::kTorchDistributed &&
                     ranks[0].pass->dropLast.value_or(s->dropLast.value_or(false));
    const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
    Violation v;
    v.property = std::string(property::kCoverage);
    v.epoch = k;
    v.detail = fmt::format(
        "evaluation pass (every batch under no_grad) over {}: {} of its {} samples were never "
        "evaluated ({}{}){}",
        describeLoader(*ranks[0].trace, loader), missing, consumed.datasetSize,
        fmt::join(never, ", "), missing > static_cast<std::int64_t>(never.size()) ? ", …" : "",
        cut ? fmt::format(", DistributedSampler(drop_last=True) cuts {} samples to {} ranks x {}",
                          consumed.datasetSize, ranks.size(),
                          distributedNumSamples(consumed.datasetSize,
                                                static_cast<std::int64_t>(ranks.size()), true))
            : (l.dropLast ? ", the loader's drop_last=True drops each rank's last partial batch"
                          : ""));
    v.likelyCause =
        cut ? "drop_last=True in the evaluation sampler drops N % W samples so that every rank "
              "gets the same number, and the metric never sees them; evaluate every sample once: "
              "an unpadded shard (indices[rank::world_size], summing counts with all_reduce) or "
              "the whole set on rank 0"
            : "the evaluation loop leaves samples out (the loader's drop_last=True, or a break); "
              "an evaluation must score every sample once";
    record(loader, v, "evaluated");
  }

  void checkEvaluation(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    for (const auto& rp : ranks) {
      if (!rp.pass->ended || rp.pass->batches.empty()) return;
      for (const auto& b : rp.pass->batches) {
        if (b.grad) return;  // training, or evaluation with autograd on: not judged
      }
    }
    if (!allKnown(ranks, true)) return;
    if (eachRankItsOwnDataset(loader, ranks)) {
      notApplicable(loader, fmt::format("each rank evaluates a dataset of its own under {}, which "
                                        "does not split one dataset across ranks (their listings "
                                        "or rows differ): no evaluation across ranks is judged",
                                        samplerClass(ranks[0])));
      return;
    }
    const auto n = commonDatasetLen(loader, k, ranks);
    if (!n) return;
    const Partition consumed = partitionOf(ranks, *n, k, true);
    judged(property::kNoDuplicates);
    judged(property::kCoverage);
    checkEvaluatedOnce(loader, k, ranks, consumed);
    auto v = checkNoDuplicates(consumed);
    if (!v) return;
    std::int64_t total = 0;
    std::set<Index> distinct;
    for (const auto& shard : consumed.ranks) {
      total += static_cast<std::int64_t>(shard.size());
      distinct.insert(shard.begin(), shard.end());
    }
    const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
    const bool padded = s && s->order == OrderKind::kTorchDistributed &&
                        !ranks[0].pass->dropLast.value_or(false);
    if (const auto gather = gatheredAfter(ranks)) {
      // NOTE [Padding that is gathered] (docs/audit.md): the duplicates hurt only a metric that
      // counts them; a program that gathers its results after the pass can keep each index once,
      // and the trace cannot see whether it does. Said, never failed.
      notApplicable(loader, fmt::format(
          "its evaluation hands out {} samples for {} distinct{}, and every rank calls {} after "
          "it: if the gathered results are keyed by sample index and kept once, the metric counts "
          "each sample once (the trace cannot see whether they are)",
          total, distinct.size(), padded ? " (DistributedSampler's padding)" : "", *gather));
      return;
    }
    v->detail = fmt::format(
        "evaluation pass (every batch under no_grad) over {}: the ranks evaluated {} samples for "
        "{} distinct, {} counted twice{}; {}",
        describeLoader(*ranks[0].trace, loader), total, distinct.size(),
        total - static_cast<std::int64_t>(distinct.size()),
        padded ? fmt::format(" (DistributedSampler pads {} samples to {} ranks x {})", *n,
                             ranks.size(), distributedNumSamples(*n, static_cast<std::int64_t>(ranks.size()), false))
               : "",
        v->detail);
    const bool wholeOnEveryRank =
        !padded && std::all_of(consumed.ranks.begin(), consumed.ranks.end(), [&](const auto& shard) {
          return static_cast<std::int64_t>(std::set<Index>(shard.begin(), shard.end()).size()) == *n;
        });
    v->likelyCause =
        wholeOnEveryRank
            ? fmt::format("every rank evaluates the whole set: the loader's {} is not split across "
                          "the ranks, so a metric summed or averaged over them counts each sample "
                          "{} times{}; shard it with DistributedSampler(shuffle=False) (and drop "
                          "its padding), or evaluate on one rank",
                          s ? s->className : std::string("sampler"), ranks.size(),
                          frameworkHint(*ranks[0].trace, ", as Trainer(use_distributed_sampler="
                                                         "False) leaves it"))
        : padded
            ? fmt::format("DistributedSampler without drop_last pads every rank to ceil(N / W) "
                          "samples with copies of the first ones, so metrics summed over ranks "
                          "count those twice{}; evaluate an unpadded shard "
                          "(indices[rank::world_size]) or drop the duplicates when gathering "
                          "results",
                          frameworkHint(*ranks[0].trace, " (Lightning puts that sampler under "
                                                         "its validation loaders: for an exact "
                                                         "metric validate on one device)"))
            : "the ranks' evaluation shards overlap, so metrics summed over ranks count those "
              "samples twice; give each rank a disjoint shard, or drop the duplicates when "
              "gathering results";
    record(loader, *v);
  }

  // The gather every rank called after its evaluation pass and before the loader's next pass (or
  // the end of the trace): all_gather of predictions and indices, gather_object to rank 0. Empty
  // when some rank gathered nothing.
  static std::optional<std::string> gatheredAfter(const std::vector<RankPass>& ranks) {
    static const std::set<std::string> kGathers = {"all_gather", "all_gather_object",
                                                   "all_gather_into_tensor", "_all_gather_base",
                                                   "gather", "gather_object"};
    std::optional<std::string> op;
    for (const auto& rp : ranks) {
      const std::int64_t from = rp.pass->batches.back().line;
      std::int64_t until = rp.trace->lines + 1;
      for (const auto& q : rp.trace->passes) {
        if (q.loader == rp.pass->loader && q.startLine > rp.pass->startLine) {
          until = std::min(until, q.startLine);
        }
      }
      std::optional<std::string> found;
      for (const auto& [group, list] : rp.trace->collectives) {
        for (const auto& c : list) {
          if (c.src == "user" && c.line > from && c.line < until && kGathers.count(c.op)) {
            found = c.op;
            break;
          }
        }
        if (found) break;
      }
      if (!found) return std::nullopt;
      op = found;
    }
    return op;
  }

  void record(std::int64_t loader, const Violation& v, const std::string& kind = "") {
    auto key = std::make_tuple(loader, v.property, kind);
    auto it = findings_.find(key);
    if (it == findings_.end()) {
      findings_.emplace(key, Finding{v, 1});
    } else {
      ++it->second.epochs;
    }
  }

  void judged(std::string_view property) { judged_.insert(std::string(property)); }

  const Trace& trace_;
  std::vector<std::string>& notes_;
  std::set<std::string>& judged_;
  OrderCache cache_;
  std::map<std::tuple<std::int64_t, std::string, std::string>, Finding> findings_;
};

}  // namespace

void checkData(const Trace& trace, std::vector<Violation>& out, std::vector<std::string>& notes,
               std::set<std::string>& judged) {
  DataChecker(trace, notes, judged).run(out);
}

}  // namespace ddph::audit
