// A pass's partition across ranks: valid-range, coverage and disjointness of what every rank's
// sampler yields in one pass over one dataset (partition_checks.h), with what excuses a finding
// (a batch sampler's padding with whole batches, a job resumed mid-epoch) and what comes before
// it (one dataset on every rank, a sampler made for another dataset, draws with replacement).
// Also a pass over a sharded loader that some ranks never made (NOTE [A loader on some ranks
// only]). Why a partition fails: data_partition_causes.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "data_checks.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::audit {

using sampler::checkCoverage;
using sampler::checkDisjointness;
using sampler::checkValidRange;
using sampler::distributedNumSamples;
using sampler::Expectations;
using sampler::Index;
using sampler::Partition;
using sampler::Violation;
namespace property = sampler::property;

namespace {

// NOTE [A job that begins at a later epoch] (docs/audit.md, "A run of several jobs"): the
// loader's first pass drew its order with a sampler epoch above 0 (set_epoch(e) before any pass):
// the job resumed a run, and a sampler of its own may start inside that epoch. What it left
// out of the epoch is the earlier job's to have trained: a note here, judged with --resumes.
bool beganAtALaterEpoch(std::int64_t k, const std::vector<RankPass>& ranks) {
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
std::optional<std::size_t> batchesPaddedWithCopies(const std::vector<RankPass>& ranks,
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
  const bool once =
      total == n && std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; });
  return once ? std::optional<std::size_t>(padded) : std::nullopt;
}

// A disjointness finding of a recorded order that is padding with whole batches: a note instead.
bool paddedWithCopies(DataFindings& findings, std::int64_t loader, const Violation& v,
                      const std::vector<RankPass>& ranks, std::int64_t n) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  if (v.property != property::kDisjointness || !s || s->order != OrderKind::kRecorded) return false;
  const auto padded = batchesPaddedWithCopies(ranks, n);
  if (!padded) return false;
  findings.notApplicable(loader, fmt::format(
      "{}: {} of the {} ranks end each epoch with a copy of a batch drawn earlier in it: "
      "padding to equal step counts, as DistributedSampler pads (every other sample drawn "
      "once)",
      samplerName(ranks[0]), *padded, ranks.size()));
  return true;
}

// A coverage finding of a job's first pass that began at a later epoch: a note instead.
bool resumedMidEpoch(DataFindings& findings, std::int64_t loader, const Violation& v,
                     std::int64_t k, const std::vector<RankPass>& ranks, const Partition& part) {
  if (v.property != property::kCoverage || !beganAtALaterEpoch(k, ranks)) return false;
  const std::int64_t drawn = static_cast<std::int64_t>(
      std::set<Index>(part.ranks[0].begin(), part.ranks[0].end()).size());
  findings.notApplicable(loader, fmt::format(
      "the job began at epoch {} and its first pass drew part of it (rank 0: {} samples): a "
      "job resumed mid-epoch from a checkpoint, the epoch's rest trained by the job before it; "
      "audit them together to judge it (ddp-sim launch --audit --resumes EARLIER_TRACE_DIR, "
      "or ddp-sim audit EARLIER_TRACE_DIR THIS_TRACE_DIR)",
      *ranks[0].pass->samplerEpoch, drawn));
  return true;
}

// valid-range, coverage and disjointness of the ranks' orders over one dataset of `n` samples.
bool checkSplit(DataFindings& findings, std::int64_t loader, std::int64_t k, std::int64_t n,
                const std::vector<RankPass>& ranks) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  Expectations e;
  e.dropLast = ranks[0].pass->dropLast.value_or(s && s->dropLast.value_or(false));
  // NOTE [drop_last that drops everything] (core/scenario/src/epoch_checks.cpp): drop_last may
  // drop the N % W tail; when that is the whole dataset the epoch trains on nothing.
  const auto world = static_cast<std::int64_t>(ranks.size());
  const bool dropsEverything = e.dropLast && n > 0 && distributedNumSamples(n, world, true) == 0;
  if (dropsEverything) e.dropLast = false;
  const Partition part = partitionOf(ranks, n, k, false);
  for (auto p : {property::kValidRange, property::kCoverage, property::kDisjointness}) {
    findings.judged(p);
  }
  auto v = checkValidRange(part);
  if (!v) v = checkCoverage(part, e);
  if (!v) v = checkDisjointness(part, e);
  if (!v) return true;
  // NOTE [A split that loses and copies] (docs/audit.md): a split that leaves samples on no rank
  // and puts others on two (a seed per rank) breaks both promises: two findings of one cause, in
  // the order the simulator's online checks give them (coverage, then disjointness).
  std::optional<Violation> copies;
  if (v->property == property::kCoverage) copies = checkDisjointness(part, e);
  const bool copied = copies.has_value();
  if (copied) v->notes.push_back("the same split puts samples on more than one rank too (the "
                                 "disjointness finding)");
  if (paddedWithCopies(findings, loader, *v, ranks, n)) return true;
  if (resumedMidEpoch(findings, loader, *v, k, ranks, part)) return false;
  if (v->property == property::kCoverage && !copied &&
      subsetSampler(findings, loader, k, n, ranks, *v)) {
    return false;
  }
  v->detail = fmt::format("{}, {}: {}", describeLoader(*ranks[0].trace, loader),
                          samplerName(ranks[0]), v->detail);
  Explanation why =
      dropsEverything
          ? Explanation{fmt::format("DistributedSampler(drop_last=True) with N = {} < W = {} gives "
                                    "num_samples = 0: no rank gets a sample, so every pass over it "
                                    "draws nothing",
                                    n, world),
                        "use fewer ranks or drop_last=False"}
          : partitionCause(ranks, v->property, v->ranks, findings.trace());
  if (copies) {
    copies->detail = fmt::format("{}, {}: {}", describeLoader(*ranks[0].trace, loader),
                                 samplerName(ranks[0]), copies->detail);
    copies->notes.push_back("the same split leaves samples on no rank too (the coverage finding)");
    explain(*copies, why);
  }
  explain(*v, std::move(why));
  findings.record(loader, *v);
  if (copies) findings.record(loader, *copies);
  return false;
}

// A sampler made for another dataset than its loader's (a copied line that passes the training
// set's sampler to the evaluation loader): it draws indices of its own length, so a longer
// dataset's tail is never drawn on any rank (coverage), a shorter one's indices run past it.
bool samplerOverAnotherLength(DataFindings& findings, std::int64_t loader, std::int64_t k,
                              const std::vector<RankPass>& ranks) {
  const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
  const std::optional<std::int64_t> drawn = ranks[0].pass->datasetLen;
  if (l.datasetLen <= 0 || !drawn || *drawn <= 0 || *drawn == l.datasetLen) return false;
  // A sampler whose own dataset is not the loader's (a wrapper over the draws of another sampler,
  // catalyst's DistributedSamplerWrapper) may yield indices past its own length: it maps them.
  for (const auto& rp : ranks) {
    if (rp.order && std::any_of(rp.order->begin(), rp.order->end(),
                                [&](sampler::Index i) { return i >= *drawn; }))
      return false;
  }
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
  v.detail =
      fmt::format("{}: {} was built over {} samples{}, so it draws indices 0..{} only: {}",
                  describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]), *drawn,
                  alsoUsedBy, *drawn - 1,
                  *drawn < l.datasetLen
                      ? fmt::format("{} of the loader's {} samples ({}..{}) are on no rank",
                                    l.datasetLen - *drawn, l.datasetLen, *drawn, l.datasetLen - 1)
                      : fmt::format("indices {}..{} are past the loader's {} samples", l.datasetLen,
                                    *drawn - 1, l.datasetLen));
  v.likelyCause = fmt::format("the loader was given a sampler made for another dataset{}",
                              owner ? fmt::format(" (loader {}'s)", *owner) : "");
  v.help = "build a sampler over the loader's own dataset (DistributedSampler(dataset, "
           "shuffle=False) for an evaluation)";
  findings.judged(property::kCoverage);
  findings.record(loader, v);
  return true;
}

// NOTE [A dataset changed under its sampler] (docs/audit.md): torch's DistributedSampler fixes
// num_samples and total_size from len(dataset) in its constructor, but draws randperm over the
// dataset's length at each iteration. A dataset filtered after the sampler was made (shorter by
// the time of the pass) is padded up to the old total_size with copies of its order's head: those
// samples are trained twice every epoch, beyond the padding of its own length. (Longer, torch
// raises, or with drop_last cuts the order: the tail is never drawn.)
bool datasetChangedUnderItsSampler(DataFindings& findings, std::int64_t loader, std::int64_t k,
                                   const std::vector<RankPass>& ranks) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  const std::int64_t built = s ? s->datasetLen : 0, now = ranks[0].pass->datasetLen;
  if (!s || s->order != OrderKind::kTorchDistributed || built <= 0 || now <= 0 || built == now) {
    return false;
  }
  // torch's total_size: num_samples of the length it was built for, times its num_replicas.
  const std::int64_t world = ranks[0].pass->numReplicas.value_or(
      s->numReplicas.value_or(static_cast<std::int64_t>(ranks.size())));
  if (world <= 0) return false;
  const bool dropLast = ranks[0].pass->dropLast.value_or(s->dropLast.value_or(false));
  const std::int64_t total = distributedNumSamples(built, world, dropLast) * world;
  if ((!dropLast && now >= total) || (dropLast && now <= total)) return false;  // torch raises
  Violation v;
  v.epoch = k;
  const std::string head = fmt::format(
      "{}, {}: the sampler was built over {} samples and its dataset has {} when iterated, yet it "
      "still yields {} per rank ({} in all)",
      describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]), built, now, total / world,
      total);
  if (now < total) {
    v.property = std::string(property::kDisjointness);
    v.detail = fmt::format("{}: it pads the {} samples' order with {} copies of its head, so {} "
                           "samples are trained twice in this epoch",
                           head, now, total - now, std::min(total - now, now));
    v.likelyCause = "the dataset shrank after its DistributedSampler was made (a filter, a "
                    "deduplication or a split applied to the dataset object the sampler holds): "
                    "DistributedSampler fixes num_samples and total_size from len(dataset) in its "
                    "constructor";
  } else {
    v.property = std::string(property::kCoverage);
    v.detail = fmt::format("{}: drop_last cuts the {} samples' order at {}, so {} samples are on "
                           "no rank in this epoch",
                           head, now, total, now - total);
    v.likelyCause = "the dataset grew after its DistributedSampler was made: DistributedSampler "
                    "fixes num_samples and total_size from len(dataset) in its constructor";
  }
  v.help = "build the DistributedSampler (and its DataLoader) after the dataset is final";
  findings.judged(v.property);
  findings.record(loader, v);
  return true;
}

// The ranks that made pass `iter` of `loader` and those that never iterated it at all.
struct SomeRanksOnly {
  std::vector<const RankTrace*> with;
  std::vector<std::int64_t> without;
};

// Nothing unless every rank either made the pass or never iterated the loader and ended
// normally, and there are ranks of each: a rank that iterated the loader but fewer times (it
// stopped early) is the collective checks' finding, and one that failed a rank-failure.
std::optional<SomeRanksOnly> someRanksOnly(const Trace& trace, std::int64_t loader,
                                           std::int64_t iter) {
  SomeRanksOnly out;
  for (const auto& t : trace.ranks) {
    if (!t) return std::nullopt;
    if (t->findPass(loader, iter)) {
      out.with.push_back(&*t);
      continue;
    }
    const bool neverIterated =
        std::none_of(t->passes.begin(), t->passes.end(),
                     [&](const PassRecord& p) { return p.loader == loader; });
    if (!t->endedNormally() || !neverIterated) return std::nullopt;
    out.without.push_back(t->rank);
  }
  if (out.with.empty() || out.without.empty()) return std::nullopt;
  return out;
}

// NOTE [Loaders that only some ranks build] (docs/trace-format.md): the ranks that iterate the
// loader hold its sampler's every replica (num_replicas of them, ranks 0 .. num_replicas - 1)
// and together drew every sample: the shards are all read, by a loader built per group of ranks.
bool readersHoldEveryShard(DataFindings& findings, std::int64_t loader, std::int64_t iter,
                           const SomeRanksOnly& some, const SamplerRecord& s) {
  std::set<std::int64_t> replicas;
  std::set<Index> seen;
  for (const auto* t : some.with) {
    const SamplerRecord* own = samplerOf(*t, loader);
    if (!own || own->numReplicas != s.numReplicas || !own->rank) return false;
    replicas.insert(*own->rank);
    const PassRecord& p = *t->findPass(loader, iter);
    const auto consumed = consumedIndices(*t, p, samplerOrder(*t, p, findings.orders()));
    if (!consumed) return false;
    seen.insert(consumed->begin(), consumed->end());
  }
  const std::int64_t n = some.with.front()->findPass(loader, iter)->datasetLen;
  return static_cast<std::int64_t>(replicas.size()) == *s.numReplicas &&
         replicas.size() == some.with.size() && *replicas.begin() == 0 &&
         *replicas.rbegin() == *s.numReplicas - 1 && static_cast<std::int64_t>(seen.size()) == n;
}

// The coverage finding of a sharded loader whose shards only some ranks read.
Violation unreadShards(DataFindings& findings, std::int64_t loader, std::int64_t iter,
                       const SomeRanksOnly& some, const std::vector<std::int64_t>& readers,
                       const SamplerRecord& s) {
  const RankTrace& first = *some.with.front();
  const std::int64_t n = first.findPass(loader, iter)->datasetLen;
  std::set<Index> seen;
  for (const auto* t : some.with) {
    const PassRecord& p = *t->findPass(loader, iter);
    if (const auto consumed = consumedIndices(*t, p, samplerOrder(*t, p, findings.orders()))) {
      seen.insert(consumed->begin(), consumed->end());
    }
  }
  Violation v;
  v.property = std::string(property::kCoverage);
  v.ranks = some.without;
  v.epoch = iter;
  const bool oneReader = readers.size() == 1, oneLeft = some.without.size() == 1;
  v.detail = fmt::format(
      "{}: sampler {} ({}) splits its {} samples across {} ranks, but only {} iterate{} it in "
      "pass {}: {} never read{} {} shard{}, so {} of the {} samples are never seen",
      describeLoader(first, loader), s.id, s.className, n, *s.numReplicas, rankList(readers),
      oneReader ? "s" : "", iter, rankList(some.without), oneLeft ? "s" : "",
      oneLeft ? "its" : "their", oneLeft ? "" : "s",
      seen.empty() ? std::string("most")
                   : std::to_string(n - static_cast<std::int64_t>(seen.size())),
      n);
  v.likelyCause = fmt::format(
      "a loader sharded across {} ranks (DistributedSampler) is iterated on {} only (an "
      "evaluation under `if rank == 0`)",
      *s.numReplicas, rankList(readers));
  v.help = "give that loop an unsharded loader (SequentialSampler), or evaluate on every rank and "
           "all_reduce the sums";
  // As many readers as replicas, but some replica read twice: the readers' sampler ranks.
  std::map<std::int64_t, std::vector<std::int64_t>> byReplica;
  for (const auto* t : some.with) {
    const SamplerRecord* own = samplerOf(*t, loader);
    if (own && own->rank) byReplica[*own->rank].push_back(t->rank);
  }
  if (static_cast<std::int64_t>(readers.size()) == *s.numReplicas &&
      static_cast<std::int64_t>(byReplica.size()) < *s.numReplicas) {
    std::vector<std::string> parts;
    for (const auto& [replica, ranks] : byReplica) {
      parts.push_back(fmt::format("{} as replica {}", rankList(ranks), replica));
    }
    v.likelyCause = fmt::format(
        "the {} ranks that build the loader (one per group of ranks: a node leader) are its {} "
        "replicas, but they gave their samplers the same rank ({}): the replicas no one took are "
        "never read",
        readers.size(), *s.numReplicas, fmt::join(parts, "; "));
    v.help = "give each reader its own replica: DistributedSampler(num_replicas=number of "
             "groups, rank=the group's index, such as the node's rank)";
  }
  return v;
}

}  // namespace

// NOTE [A split in two levels] (docs/audit.md): one dataset per group of ranks, each split
// within its group; every group's partition is judged alone, and a note says so once.
bool checkSplitsInGroups(DataFindings& findings, std::int64_t loader, std::int64_t k,
                         const std::vector<std::vector<RankPass>>& groups) {
  const RankPass& first = groups.front().front();
  if (k == 0) {
    std::vector<std::string> members;
    std::set<int> nodes;
    bool perNode = true;
    for (const auto& g : groups) {
      std::vector<std::int64_t> rs;
      std::set<int> within;
      for (const auto& rp : g) {
        rs.push_back(rp.trace->rank);
        if (rp.trace->node) within.insert(*rp.trace->node);
      }
      perNode = perNode && within.size() == 1 && g.size() == static_cast<std::size_t>(
                                                     first.trace->localWorldSize.value_or(0));
      if (within.size() == 1) nodes.insert(*within.begin());
      members.push_back(rankList(rs));
    }
    perNode = perNode && nodes.size() == groups.size();
    findings.note(fmt::format(
        "{}: the ranks hold {} datasets, each shared by a group of {} ranks ({}){} and split "
        "among them by {}: a split in two levels, each group's partition judged alone (whether "
        "the groups' datasets overlap is not known)",
        describeLoader(*first.trace, loader), groups.size(), groups.front().size(),
        fmt::join(members, "; "), perNode ? ", one group per node," : "", samplerName(first)));
  }
  bool ok = true;
  for (const auto& g : groups) {
    if (!allKnown(g, false)) continue;
    ok = checkSplit(findings, loader, k, g.front().pass->datasetLen, g) && ok;
  }
  return ok;
}

bool checkPartition(DataFindings& findings, std::int64_t loader, std::int64_t k,
                    const std::vector<RankPass>& ranks) {
  if (const auto groups = splitGroups(ranks, loader); groups.size() > 1) {
    return checkSplitsInGroups(findings, loader, k, groups);
  }
  if (!sameDataset(findings, loader, k, ranks)) {
    checkSharedOwnData(findings, loader, k, ranks);
    return false;
  }
  const std::int64_t n = ranks[0].pass->datasetLen;
  if (!allKnown(ranks, false)) return true;
  if (samplerOverAnotherLength(findings, loader, k, ranks)) return false;
  if (datasetChangedUnderItsSampler(findings, loader, k, ranks)) return false;
  if (drawsWithReplacement(ranks, loader, n)) {
    checkDrawsDiffer(findings, loader, k, n, ranks);
    return false;  // coverage, disjointness and reshuffle do not apply
  }
  // An evaluation on every rank is judged by what it counts (checkEvaluation: samples evaluated
  // twice or never, the whole set on every rank), not also as a training partition: one harm,
  // one finding.
  if (evaluatedOnEveryRank(ranks)) return true;
  return checkSplit(findings, loader, k, n, ranks);
}

// NOTE [A loader on some ranks only] (docs/audit.md): pass `iter` of `loader` on some ranks,
// while every other rank ran to its end without ever iterating the loader (an evaluation under
// `if rank == 0`). A sampler that splits the dataset across the world (DistributedSampler) then
// leaves the other ranks' shards unread: coverage. One that does not split it is a single-rank
// loop: a note. A rank that iterated the loader but fewer times (it stopped early) is the
// collective checks' finding, and one that failed a rank-failure: not this. Returns whether the
// pass was such a loop (judged or noted).
// NOTE [What a metric summed]: the whole set evaluated on each of several ranks (not on every
// rank: one per node under `LOCAL_RANK == 0`), and the all_reduce after it summed that many
// copies of the set's size: every sample counted once per such rank. The finding, or nothing.
std::optional<Violation> wholeSetSummedOnSomeRanks(DataFindings& findings, std::int64_t loader,
                                                   std::int64_t iter, const SomeRanksOnly& some,
                                                   const std::vector<std::int64_t>& readers) {
  if (readers.size() < 2) return std::nullopt;
  std::vector<RankPass> passes;
  std::int64_t n = -1;
  for (const RankTrace* t : some.with) {
    const PassRecord* p = t->findPass(loader, iter);
    if (!p || !p->ended || !isEvaluation(*p)) return std::nullopt;
    std::int64_t handed = 0;
    for (const auto& b : p->batches) handed += b.size;
    if (handed != p->datasetLen || (n >= 0 && n != handed)) return std::nullopt;
    n = handed;
    passes.push_back(RankPass{t, p, std::nullopt, std::nullopt, false});
  }
  const auto copies = static_cast<std::int64_t>(readers.size());
  if (n <= 0 || sumsAfterPass(passes).count(static_cast<double>(copies * n)) == 0) return std::nullopt;
  Violation v;
  v.property = std::string(property::kNoDuplicates);
  v.epoch = iter;
  v.ranks = readers;
  const RankTrace& first = *some.with.front();
  v.detail = fmt::format("evaluation pass over {}: {} each evaluated the whole set ({} samples), "
                         "and the all_reduce after it summed {}: every sample counted {} times",
                         describeLoader(first, loader), rankList(readers), n, copies * n, copies);
  std::set<int> nodes;
  bool localZero = true;
  for (const RankTrace* t : some.with) {
    if (t->node) nodes.insert(*t->node);
    localZero = localZero && t->localRank && *t->localRank == 0;
  }
  if (localZero && nodes.size() == readers.size() && nodes.size() > 1) {
    explain(v, {fmt::format("the evaluation runs where LOCAL_RANK == 0, which is one rank on each "
                            "of the {} nodes, not one for the world, and each of them sums the "
                            "whole set into the metric",
                            nodes.size()),
                "evaluate where dist.get_rank() == 0 (RANK), or shard the evaluation over every "
                "rank with DistributedSampler"});
  } else {
    explain(v, {"the whole evaluation set runs on several ranks, each summing it into the metric "
                "that the all_reduce adds up",
                "evaluate on one rank (dist.get_rank() == 0), or shard the evaluation over every "
                "rank with DistributedSampler"});
  }
  return v;
}

bool checkPassOnSomeRanks(DataFindings& findings, std::int64_t loader, std::int64_t iter) {
  const auto some = someRanksOnly(findings.trace(), loader, iter);
  if (!some) return false;
  const RankTrace& first = *some->with.front();
  const SamplerRecord* s = samplerOf(first, loader);
  std::vector<std::int64_t> readers;
  for (const auto* t : some->with) readers.push_back(t->rank);
  if (!s || !s->numReplicas || *s->numReplicas < 2) {
    if (auto counted = wholeSetSummedOnSomeRanks(findings, loader, iter, *some, readers)) {
      findings.judged(property::kNoDuplicates);
      findings.record(loader, *counted);
      return true;
    }
    if (iter == 0) {
      findings.note(
          fmt::format("{}: iterated on {} only, by a sampler that does not split "
                      "it across ranks: a single-rank loop, no partition to check",
                      describeLoader(first, loader), rankList(readers)));
    }
    return true;
  }
  findings.judged(property::kCoverage);
  if (readersHoldEveryShard(findings, loader, iter, *some, *s)) {
    if (iter == 0) {
      findings.note(fmt::format(
          "{}: iterated on {} only, whose samplers are all {} of its replicas "
          "(num_replicas={}): one loader per group of ranks (a node leader that hands its "
          "batches on), every shard read",
          describeLoader(first, loader), rankList(readers), *s->numReplicas, *s->numReplicas));
    }
    return true;
  }
  findings.record(loader, unreadShards(findings, loader, iter, *some, readers, *s));
  return true;
}

}  // namespace ddph::audit
