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
#include "ddph/verify/partition_checks.h"
#include "ddph/verify/distributed_sampler.h"

namespace ddph::audit {
namespace {

const SamplerRecord* samplerOf(const RankTrace& t, std::int64_t loader) {
  const auto l = t.loaders.find(loader);
  if (l == t.loaders.end()) return nullptr;
  const auto s = t.samplers.find(l->second.sampler);
  return s == t.samplers.end() ? nullptr : &s->second;
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
const PassRecord* exhaustedPartner(const RankTrace& t, const PassRecord& p) {
  for (const auto& q : t.passes) {
    if (q.loader != p.loader && q.ended && q.startLine > p.startLine && q.endLine < p.endLine) {
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
  DataChecker(const Trace& trace, std::vector<std::string>& notes) : trace_(trace), notes_(notes) {}

  void run(std::vector<Violation>& out) {
    std::set<std::int64_t> loaders;
    for (const auto& t : trace_.ranks) {
      if (t) for (const auto& [id, l] : t->loaders) loaders.insert(id);
    }
    for (auto loader : loaders) checkLoader(loader);
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
      if (ranks.empty()) break;
      judged = judged || allKnown(ranks, false);
      const bool partitionOk = checkPartition(loader, k, ranks);
      if (partitionOk && !previous.empty()) checkNewOrder(loader, previous, ranks);
      if (partitionOk) checkConsumed(loader, k, ranks);
      checkEvaluation(loader, k, ranks);
      previous = std::move(ranks);
    }
    if (!judged && iters > 0) {
      notes_.push_back(fmt::format(
          "{}: no epoch's partition could be checked (its sampler's order is known only from a "
          "pass run to its end on every rank)",
          describeLoader(*firstTrace(), loader)));
    }
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
    const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
    if (!s || s->order != OrderKind::kTorchDistributed) return std::nullopt;
    std::vector<std::string> parts;
    for (const auto& [n, rs] : byLen) parts.push_back(fmt::format("{} {}", rankList(rs), n));
    Violation v;
    v.property = std::string(property::kCoverage);
    v.epoch = k;
    v.detail = fmt::format("{}: the ranks' datasets differ in length ({}), so their shards do not "
                           "split one dataset",
                           describeLoader(*ranks[0].trace, loader), fmt::join(parts, ", "));
    v.likelyCause = "each rank builds its dataset from its own file listing or filter; build the "
                    "same dataset (same files, same order) on every rank";
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
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> sides(byListing.begin(), byListing.end());
    std::stable_sort(sides.begin(), sides.end(),
                     [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    std::vector<std::string> parts;
    for (const auto& [f, rs] : sides) parts.push_back(fmt::format("{} {}", rankList(rs), f));
    Violation v;
    v.property = std::string(property::kCoverage);
    v.epoch = k;
    v.detail = fmt::format("{}: the ranks' datasets list their samples in different orders ({}), so "
                           "an index names a different sample on each rank and the shards overlap "
                           "and leave samples out, however the sampler splits the indices",
                           describeLoader(*ranks[0].trace, loader), fmt::join(parts, "; "));
    v.likelyCause = "each rank lists its files itself (os.listdir and glob give no defined order, "
                    "and nodes differ); sort the listing (sorted(os.listdir(root))) or build it once "
                    "and share it";
    record(loader, v, "listing");
    return false;
  }

  bool checkPartition(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    const auto n = commonDatasetLen(loader, k, ranks);
    if (!n) return false;
    if (!sameListing(loader, k, ranks)) return false;
    if (!allKnown(ranks, false)) return true;
    const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
    Expectations e;
    e.dropLast = ranks[0].pass->dropLast.value_or(s && s->dropLast.value_or(false));
    const Partition part = partitionOf(ranks, *n, k, false);
    auto v = checkValidRange(part);
    if (!v) v = checkCoverage(part, e);
    if (!v) v = checkDisjointness(part, e);
    if (!v) return true;
    v->detail = fmt::format("{}, {}: {}", describeLoader(*ranks[0].trace, loader),
                            samplerName(ranks[0]), v->detail);
    v->likelyCause = partitionCause(ranks);
    record(loader, *v);
    return false;
  }

  // Why ranks' orders do not split one dataset, from what the samplers say about themselves.
  static std::string partitionCause(const std::vector<RankPass>& ranks) {
    std::set<std::int64_t> seeds, replicas, samplerRanks;
    for (const auto& rp : ranks) {
      if (rp.pass->seed) seeds.insert(*rp.pass->seed);
      if (rp.pass->numReplicas) replicas.insert(*rp.pass->numReplicas);
      if (rp.pass->rank) samplerRanks.insert(*rp.pass->rank);
    }
    const auto w = static_cast<std::int64_t>(ranks.size());
    if (seeds.size() > 1) {
      return fmt::format("the ranks' samplers have different seeds ({}), so each shuffles its own "
                         "order and their shards overlap and leave samples out; give every rank "
                         "the same seed",
                         fmt::join(seeds, ", "));
    }
    if (!replicas.empty() && (replicas.size() > 1 || *replicas.begin() != w)) {
      return fmt::format("the samplers' num_replicas ({}) is not the world size {}; pass "
                         "num_replicas=world_size (or leave it to the default)",
                         fmt::join(replicas, ", "), w);
    }
    if (!samplerRanks.empty() && static_cast<std::int64_t>(samplerRanks.size()) != w) {
      return "several ranks give their sampler the same rank; pass rank=dist.get_rank()";
    }
    return {};  // the catalogue's cause
  }

  static std::string samplerName(const RankPass& rp) {
    const SamplerRecord* s = samplerOf(*rp.trace, rp.pass->loader);
    if (!s) return "its sampler";
    return fmt::format("sampler {} ({})", s->id, s->className);
  }

  void checkNewOrder(std::int64_t loader, const std::vector<RankPass>& before,
                      const std::vector<RankPass>& after) {
    if (!allKnown(before, false) || !allKnown(after, false)) return;
    const SamplerRecord* s = samplerOf(*before[0].trace, loader);
    const auto shuffle = before[0].pass->shuffle ? before[0].pass->shuffle
                                                 : (s ? s->shuffle : std::nullopt);
    const bool epochsSet = s && !s->setEpochCalls.empty();
    if (!(shuffle.value_or(false) || (!shuffle && epochsSet))) return;
    Expectations e;
    e.shuffle = true;
    const std::int64_t k = before[0].pass->iter;
    const Partition a = partitionOf(before, before[0].pass->datasetLen, k, false);
    const Partition b = partitionOf(after, after[0].pass->datasetLen, k + 1, false);
    auto v = ddph::checkReshuffle(a, b, e);
    if (!v) return;
    const auto e0 = before[0].pass->samplerEpoch, e1 = after[0].pass->samplerEpoch;
    std::string why;
    if (s && s->setEpochCalls.empty()) {
      why = fmt::format("set_epoch is never called on {}", samplerName(before[0]));
      v->likelyCause = "set_epoch(epoch) is not called before each epoch, so every epoch repeats "
                       "epoch 0's order; call sampler.set_epoch(epoch) at the start of every epoch";
    } else if (e0 && e1 && *e0 == *e1) {
      why = fmt::format("set_epoch({}) was in force for both epochs", *e0);
      v->likelyCause = "set_epoch is called with the same value every epoch (e.g. a constant or "
                       "the wrong variable); pass the epoch number";
    } else if (e0 && e1) {
      why = fmt::format("the sampler's epoch went from {} to {} but its order did not change", *e0,
                        *e1);
      v->likelyCause = "the sampler ignores its epoch: seed its generator with seed + epoch";
    }
    v->detail = fmt::format("{}: {}{}", describeLoader(*before[0].trace, loader), v->detail,
                            why.empty() ? "" : "; " + why);
    record(loader, *v);
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

  void checkEvaluation(std::int64_t loader, std::int64_t k, const std::vector<RankPass>& ranks) {
    for (const auto& rp : ranks) {
      if (!rp.pass->ended || rp.pass->batches.empty()) return;
      for (const auto& b : rp.pass->batches) {
        if (b.grad) return;  // training, or evaluation with autograd on: not judged
      }
    }
    if (!allKnown(ranks, true)) return;
    const auto n = commonDatasetLen(loader, k, ranks);
    if (!n) return;
    const Partition consumed = partitionOf(ranks, *n, k, true);
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
    v->detail = fmt::format(
        "evaluation pass (every batch under no_grad) over {}: the ranks evaluated {} samples for "
        "{} distinct, {} counted twice{}; {}",
        describeLoader(*ranks[0].trace, loader), total, distinct.size(),
        total - static_cast<std::int64_t>(distinct.size()),
        padded ? fmt::format(" (DistributedSampler pads {} samples to {} ranks x {})", *n,
                             ranks.size(), distributedNumSamples(*n, static_cast<std::int64_t>(ranks.size()), false))
               : "",
        v->detail);
    v->likelyCause =
        "DistributedSampler without drop_last pads every rank to ceil(N / W) samples with copies "
        "of the first ones, so metrics summed over ranks count those twice; evaluate an unpadded "
        "shard (indices[rank::world_size]) or drop the duplicates when gathering results";
    record(loader, *v);
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

  const Trace& trace_;
  std::vector<std::string>& notes_;
  OrderCache cache_;
  std::map<std::tuple<std::int64_t, std::string, std::string>, Finding> findings_;
};

}  // namespace

void checkData(const Trace& trace, std::vector<Violation>& out, std::vector<std::string>& notes) {
  DataChecker(trace, notes).run(out);
}

}  // namespace ddph::audit
