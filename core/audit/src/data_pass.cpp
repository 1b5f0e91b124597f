// One pass over a loader on each rank: what its sampler yields (torch's DistributedSampler
// recomputed bit-exactly, SequentialSampler, or a recorded pass that ran to its end), what the
// rank consumed of it (its batches), and how the pass ended (data_pass.h, audit_checks.h).
#include <algorithm>
#include <map>

#include "data_pass.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::audit {

using sampler::distributedShard;
using sampler::Index;
using sampler::Partition;
using sampler::ShardRequest;

const SamplerRecord* samplerOf(const RankTrace& t, std::int64_t loader) {
  const auto l = t.loaders.find(loader);
  if (l == t.loaders.end()) return nullptr;
  const auto s = t.samplers.find(l->second.sampler);
  return s == t.samplers.end() ? nullptr : &s->second;
}

bool trainsOnBatches(const PassRecord& p) {
  return std::any_of(p.batches.begin(), p.batches.end(),
                     [](const BatchRecord& b) { return b.grad; });
}

namespace {

// Whether two passes trained the same model: their DDP modules at the start share one (or either
// pass names none). A trial run's model (Lightning's learning-rate finder: a DDP module of its own,
// thrown away) is not the one trained after it.
bool sameModels(const PassRecord& p, const PassRecord& q) {
  if (p.params.empty() || q.params.empty()) return true;
  return std::any_of(p.params.begin(), p.params.end(),
                     [&](const auto& m) { return q.params.count(m.first) > 0; });
}

}  // namespace

// NOTE [A run that ends inside a pass] (docs/audit.md): the loader's last pass on this rank, after
// which the program trained on nothing else: the run (this job of it) ended inside the epoch, by a
// step budget (max_steps, a time limit) or a stop to be resumed. Its rest is not left out by the
// loop; no later epoch of this job could have trained it.
bool runEndsInside(const RankTrace& t, const PassRecord& p) {
  for (const auto& q : t.passes) {
    if (q.startLine <= p.startLine) continue;
    if (q.loader == p.loader) return false;
    if (trainsOnBatches(q) && sameModels(p, q)) return false;
  }
  return true;
}

// A pass that ran to StopIteration, or handed out len(loader) batches (NOTE [Passes and epochs]).
bool completePass(const PassRecord& p) {
  return p.ended ||
         (p.declaredBatches && static_cast<std::int64_t>(p.batches.size()) >= *p.declaredBatches);
}

bool isEvaluation(const PassRecord& p) {
  return !p.batches.empty() && std::none_of(p.batches.begin(), p.batches.end(),
                                            [](const BatchRecord& b) { return b.grad; });
}

bool evaluatedOnEveryRank(const std::vector<RankPass>& ranks) {
  for (const auto& rp : ranks) {
    if (!rp.pass->ended || rp.pass->batches.empty()) return false;
    for (const auto& b : rp.pass->batches) {
      if (b.grad) return false;  // training, or evaluation with autograd on: not judged
    }
  }
  return true;
}

bool isWholeDatasetSampler(const SamplerRecord* s) {
  return s && (s->className == "torch.utils.data.sampler.RandomSampler" ||
               s->className == "torch.utils.data.sampler.SequentialSampler");
}

std::vector<std::vector<RankPass>> splitGroups(const std::vector<RankPass>& ranks,
                                               std::int64_t loader) {
  const std::vector<std::vector<RankPass>> world{ranks};
  const auto w = static_cast<std::int64_t>(ranks.size());
  std::optional<std::int64_t> m;
  std::map<std::string, std::vector<RankPass>> byData;
  std::map<std::string, std::set<std::int64_t>> samplerRanks;
  for (const auto& rp : ranks) {
    const LoaderRecord& l = rp.trace->loaders.at(loader);
    const SamplerRecord* s = samplerOf(*rp.trace, loader);
    if (!s || !datasetHashed(l)) return world;
    const auto replicas = rp.pass->numReplicas ? rp.pass->numReplicas : s->numReplicas;
    const auto rank = rp.pass->rank ? rp.pass->rank : s->rank;
    if (!replicas || !rank || (m && *m != *replicas)) return world;
    m = replicas;
    const std::string id = datasetIdentity(l);
    byData[id].push_back(rp);
    samplerRanks[id].insert(*rank);
  }
  if (!m || *m < 2 || *m >= w || w % *m != 0 || static_cast<std::int64_t>(byData.size()) != w / *m) {
    return world;
  }
  std::vector<std::vector<RankPass>> groups;
  for (auto& [id, group] : byData) {
    const auto& rs = samplerRanks[id];
    if (static_cast<std::int64_t>(group.size()) != *m || static_cast<std::int64_t>(rs.size()) != *m ||
        *rs.begin() != 0 || *rs.rbegin() != *m - 1) {
      return world;
    }
    groups.push_back(std::move(group));
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.front().trace->rank < b.front().trace->rank;
  });
  return groups;
}

bool promisesOneDataset(const SamplerRecord* s) {
  return s && (s->order == OrderKind::kTorchDistributed || s->numReplicas.has_value());
}

std::optional<std::vector<Index>> distributedOrder(const SamplerRecord& s, const PassRecord& p,
                                                   OrderCache& cache) {
  ShardRequest request;
  request.datasetSize = p.datasetLen;
  request.numReplicas = p.numReplicas.value_or(s.numReplicas.value_or(0));
  request.rank = p.rank.value_or(s.rank.value_or(-1));
  request.epoch = p.samplerEpoch.value_or(0);
  request.seed = p.seed.value_or(s.seed.value_or(0));
  if (request.numReplicas <= 0 || request.rank < 0 || request.rank >= request.numReplicas ||
      request.datasetSize < 0) {
    return std::nullopt;
  }
  const bool dropLast = p.dropLast.value_or(s.dropLast.value_or(false));
  const auto& order =
      cache.order(request.datasetSize, request.seed, request.epoch, p.shuffle.value_or(true));
  return distributedShard(order, request, dropLast);
}

namespace {

// Recorded: known only when the pass ran to its end and every batch carries its indices (a
// batch sampler's dropped last batch is then unknown; close enough for the checks that use it).
std::optional<std::vector<Index>> recordedOrder(const LoaderRecord& l, const PassRecord& p) {
  if (!p.ended || l.dropLast) return std::nullopt;
  std::vector<Index> order;
  for (const auto& b : p.batches) {
    if (!b.indices) return std::nullopt;
    order.insert(order.end(), b.indices->begin(), b.indices->end());
  }
  return order;
}

}  // namespace

std::optional<std::vector<Index>> samplerOrder(const RankTrace& t, const PassRecord& p,
                                               OrderCache& cache) {
  const SamplerRecord* s = samplerOf(t, p.loader);
  if (s && s->order == OrderKind::kTorchDistributed) return distributedOrder(*s, p, cache);
  if (s && s->order == OrderKind::kSequential) {
    std::vector<Index> order(static_cast<std::size_t>(std::max<std::int64_t>(0, p.datasetLen)));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<Index>(i);
    return order;
  }
  return recordedOrder(t.loaders.at(p.loader), p);
}

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

// The batch zip threw away is the last line before the partner's StopIteration.
bool lastBatchDiscarded(const RankTrace& t, const PassRecord& p) {
  if (p.ended || p.batches.empty()) return false;
  const PassRecord* q = exhaustedPartner(t, p);
  return q && q->endLine == p.batches.back().line + 1;
}

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
      const auto end =
          std::min<std::int64_t>(taken + b.size, static_cast<std::int64_t>(order->size()));
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

}  // namespace

std::vector<RankPass> passAcrossRanks(const Trace& trace, std::int64_t loader, std::int64_t iter,
                                      OrderCache& cache) {
  std::vector<RankPass> out;
  for (const auto& t : trace.ranks) {
    if (!t) return {};
    const PassRecord* p = t->findPass(loader, iter);
    if (!p) return {};
    RankPass rp;
    rp.trace = &*t;
    rp.pass = p;
    rp.order = samplerOrder(*t, *p, cache);
    rp.consumed = consumedIndices(*t, *p, rp.order);
    rp.dropped = isDropped(*t, *p);
    out.push_back(std::move(rp));
  }
  return out;
}

bool allKnown(const std::vector<RankPass>& ranks, bool consumed) {
  return std::all_of(ranks.begin(), ranks.end(), [&](const RankPass& rp) {
    return consumed ? rp.consumed.has_value() : rp.order.has_value();
  });
}

Partition partitionOf(const std::vector<RankPass>& ranks, std::int64_t n, std::int64_t epoch,
                      bool consumed) {
  Partition part;
  part.datasetSize = n;
  part.epoch = epoch;
  for (const auto& rp : ranks) part.ranks.push_back(consumed ? *rp.consumed : *rp.order);
  return part;
}

std::vector<const RankTrace*> tracesOf(const std::vector<RankPass>& ranks) {
  std::vector<const RankTrace*> traces;
  for (const auto& rp : ranks) traces.push_back(rp.trace);
  return traces;
}

std::int64_t nextPassLine(const RankTrace& t, const PassRecord& p) {
  std::int64_t until = t.lines + 1;
  for (const auto& q : t.passes) {
    if (q.loader == p.loader && q.startLine > p.startLine) until = std::min(until, q.startLine);
  }
  return until;
}

std::vector<const CollectiveRecord*> userCollectivesAfterPass(const RankPass& rp) {
  std::vector<const CollectiveRecord*> out;
  if (rp.pass->batches.empty()) return out;
  const std::int64_t from = rp.pass->batches.back().line;
  const std::int64_t until = nextPassLine(*rp.trace, *rp.pass);
  for (const auto& [group, list] : rp.trace->collectives) {
    for (const auto& c : list) {
      if (c.src == "user" && c.line > from && c.line < until) out.push_back(&c);
    }
  }
  return out;
}

std::set<double> sumsAfterPass(const std::vector<RankPass>& ranks) {
  std::set<double> sums;
  for (const auto& rp : ranks) {
    for (const CollectiveRecord* c : userCollectivesAfterPass(rp)) {
      sums.insert(c->values.begin(), c->values.end());
    }
  }
  return sums;
}

bool drawnByALoader(const RankTrace& t, std::int64_t id) {
  return std::any_of(t.loaders.begin(), t.loaders.end(),
                     [id](const auto& l) { return l.second.sampler == id; });
}

std::pair<std::string, std::string> globalGenerator(const std::string& name) {
  if (name == "random") return {"Python's global random generator (random.shuffle)", "random.seed"};
  if (name == "numpy") {
    return {"numpy's global generator (np.random.permutation)", "np.random.seed"};
  }
  return {"torch's global generator (torch.randperm without a generator of its own)",
          "torch.manual_seed"};
}

const SeedCall* lastSeedBefore(const RankTrace& t, const std::string& generator, std::int64_t line) {
  const SeedCall* last = nullptr;
  for (const auto& s : t.seeds) {
    if (s.line < line && s.generator == generator) last = &s;
  }
  return last;
}

}  // namespace ddph::audit
