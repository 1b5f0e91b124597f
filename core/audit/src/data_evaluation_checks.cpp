// Evaluation passes (every batch handed out under no_grad, on every rank, each run to its end):
// an evaluation scores every sample once. coverage: samples no rank evaluated (drop_last);
// no-duplicates: samples evaluated twice (DistributedSampler's padding, the whole set on every
// rank), unless every rank gathers its results after the pass (NOTE [Padding that is gathered]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <set>

#include "data_checks.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::audit {

using sampler::checkNoDuplicates;
using sampler::distributedNumSamples;
using sampler::Index;
using sampler::Partition;
using sampler::Violation;
namespace property = sampler::property;

namespace {

// Ranks whose loaders hold datasets of their own (a Subset per rank, a shard file each: their
// listings, rows or parts differ) under a sampler that does not split one dataset: an index
// names another sample on each rank, so their indices are not one dataset's.
bool eachRankItsOwnDataset(std::int64_t loader, const std::vector<RankPass>& ranks) {
  if (promisesOneDataset(samplerOf(*ranks[0].trace, loader))) return false;
  const std::string first = datasetIdentity(ranks[0].trace->loaders.at(loader));
  return std::any_of(ranks.begin(), ranks.end(), [&](const RankPass& rp) {
    return datasetIdentity(rp.trace->loaders.at(loader)) != first;
  });
}

// NOTE [A tail evaluated on every rank] (docs/audit.md): pytorch/examples' ImageNet validation.
// The evaluation sampler drops the last N % W samples (drop_last=True) and, after the pass, every
// rank evaluates exactly those in a loader of their own (a Subset of the same dataset). Each
// counts once when the metric was reduced over the ranks before the tail (a sum of the samples
// the main pass evaluated) and the tail added on every rank; summed after the tail, W times.
struct TailEvaluation {
  std::int64_t loader = -1;  ///< the tail's loader
  std::int64_t tail = 0;     ///< its samples
  std::int64_t evaluated = 0;  ///< the main pass's samples, over the ranks
  bool reducedBefore = false;  ///< a sum of `evaluated` between the main pass and the tail
  std::optional<double> summedAfter;  ///< evaluated + W x tail, summed after the tail
};

// The pass of another loader, evaluated after `main` on rank `t` before `main`'s loader's next
// pass, whose dataset is a Subset of exactly `missing` of `main`'s samples, or null.
const PassRecord* tailPassOn(const RankTrace& t, const PassRecord& main,
                             const std::set<Index>& missing) {
  std::int64_t until = std::numeric_limits<std::int64_t>::max();
  for (const auto& q : t.passes) {
    if (q.loader == main.loader && q.startLine > main.startLine) until = std::min(until, q.startLine);
  }
  for (const auto& q : t.passes) {
    if (q.loader == main.loader || q.startLine < main.endLine || q.startLine > until) continue;
    const LoaderRecord& l = t.loaders.at(q.loader);
    if (!isEvaluation(q) || !l.subsetIndices || l.subsetOf != main.datasetLen) continue;
    if (std::set<Index>(l.subsetIndices->begin(), l.subsetIndices->end()) == missing &&
        l.subsetIndices->size() == missing.size())
      return &q;
  }
  return nullptr;
}

std::optional<TailEvaluation> tailEvaluated(const std::vector<RankPass>& ranks,
                                            const std::set<Index>& missing,
                                            std::int64_t evaluated) {
  if (missing.empty()) return std::nullopt;
  TailEvaluation out;
  out.tail = static_cast<std::int64_t>(missing.size());
  out.evaluated = evaluated;
  out.reducedBefore = true;
  const auto world = static_cast<double>(ranks.size());
  for (const auto& rp : ranks) {
    const PassRecord* tail = tailPassOn(*rp.trace, *rp.pass, missing);
    if (!tail || (out.loader >= 0 && tail->loader != out.loader)) return std::nullopt;
    out.loader = tail->loader;
    bool before = false;
    for (const CollectiveRecord* c : userCollectivesAfterPass(rp)) {
      const bool sumOfMain =
          std::count(c->values.begin(), c->values.end(), static_cast<double>(evaluated)) > 0;
      if (c->line < tail->startLine) before = before || sumOfMain;
      const double times = static_cast<double>(evaluated) + world * static_cast<double>(out.tail);
      if (c->line > tail->endLine &&
          std::count(c->values.begin(), c->values.end(), times) > 0)
        out.summedAfter = times;
    }
    out.reducedBefore = out.reducedBefore && before;
  }
  return out;
}

// An evaluation pass scores every sample: samples no rank evaluated (DistributedSampler's
// drop_last cutting N to a multiple of W) are left out of the metric. Reported under coverage.
void checkEvaluatedOnce(DataFindings& findings, std::int64_t loader, std::int64_t k,
                        const std::vector<RankPass>& ranks, const Partition& consumed) {
  std::set<Index> distinct;
  for (const auto& shard : consumed.ranks) distinct.insert(shard.begin(), shard.end());
  const auto missing = consumed.datasetSize - static_cast<std::int64_t>(distinct.size());
  if (missing <= 0) return;
  std::set<Index> notEvaluated;
  for (Index i = 0; i < consumed.datasetSize; ++i) {
    if (!distinct.count(i)) notEvaluated.insert(i);
  }
  std::int64_t evaluated = 0;
  for (const auto& shard : consumed.ranks) evaluated += static_cast<std::int64_t>(shard.size());
  if (const auto tail = tailEvaluated(ranks, notEvaluated, evaluated)) {
    const std::string where = fmt::format(
        "its evaluation leaves out {} samples, which every rank then evaluates in {}", tail->tail,
        describeLoader(*ranks[0].trace, tail->loader));
    if (tail->summedAfter) {
      Violation v;
      v.property = std::string(property::kNoDuplicates);
      v.epoch = k;
      v.detail = fmt::format("{}: {}, and an all_reduce after that summed {}: {} + {} x {}",
                             describeLoader(*ranks[0].trace, loader), where, *tail->summedAfter,
                             evaluated, ranks.size(), tail->tail);
      explain(v, {fmt::format("the metric is reduced over the ranks after the tail that every "
                              "rank evaluated, so each of the {} tail samples is counted {} times",
                              tail->tail, ranks.size()),
                  "reduce the metric over the ranks before evaluating the tail on every rank "
                  "(as pytorch/examples' ImageNet validate() does), or evaluate the tail on one "
                  "rank"});
      findings.record(loader, v, "evaluated");
    } else {
      findings.notApplicable(loader, fmt::format(
          "{}{}: each sample counted once", where,
          tail->reducedBefore
              ? fmt::format(" after the metric was reduced over the ranks (a sum of {} between "
                            "them)", evaluated)
              : ""));
    }
    return;
  }
  const std::vector<Index> never(notEvaluated.begin(),
                                 std::next(notEvaluated.begin(), std::min<std::size_t>(8, notEvaluated.size())));
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
            "gets the same number, and the metric never sees them"
          : "the evaluation loop leaves samples out (the loader's drop_last=True, or a break)";
  v.help = cut ? "evaluate every sample once: an unpadded shard (indices[rank::world_size], "
                 "summing counts with all_reduce) or the whole set on rank 0"
               : "score every sample once in an evaluation";
  findings.record(loader, v, "evaluated");
}

// The gather every rank called after its evaluation pass and before the loader's next pass (or
// the end of the trace): all_gather of predictions and indices, gather_object to rank 0. Empty
// when some rank gathered nothing.
std::optional<std::string> gatheredAfter(const std::vector<RankPass>& ranks) {
  static const std::set<std::string> kGathers = {"all_gather", "all_gather_object",
                                                 "all_gather_into_tensor", "_all_gather_base",
                                                 "gather", "gather_object"};
  std::optional<std::string> op;
  for (const auto& rp : ranks) {
    std::optional<std::string> found;
    for (const CollectiveRecord* c : userCollectivesAfterPass(rp)) {
      if (kGathers.count(c->op)) {
        found = c->op;
        break;
      }
    }
    if (!found) return std::nullopt;
    op = found;
  }
  return op;
}

// Whether every rank made, after the pass, a collective that can carry results across ranks (a
// reduction or a gather of its own, not a barrier or a broadcast).
bool resultsCombinedByACollective(const std::vector<RankPass>& ranks) {
  return std::all_of(ranks.begin(), ranks.end(), [](const RankPass& rp) {
    const auto after = userCollectivesAfterPass(rp);
    return std::any_of(after.begin(), after.end(), [](const CollectiveRecord* c) {
      return c->op.find("reduce") != std::string::npos ||
             c->op.find("gather") != std::string::npos || c->op.find("scatter") != std::string::npos;
    });
  });
}

// NOTE [What a metric summed] (docs/audit.md): one of the sums after the pass is the count of
// distinct samples, and none the count evaluated: the program counted each sample once (padding
// masked out by position, weights of 0).
bool countedOnceBySums(const std::vector<RankPass>& ranks, std::int64_t total,
                       std::int64_t distinct) {
  const std::set<double> sums = sumsAfterPass(ranks);
  return sums.count(static_cast<double>(distinct)) > 0 && sums.count(static_cast<double>(total)) == 0;
}

// Why the ranks evaluated samples twice: the whole set on every rank, DistributedSampler's
// padding, or shards that overlap (why they do: `overlap`, the partition's cause).
Explanation duplicatesCause(const std::vector<RankPass>& ranks, const Partition& consumed,
                            std::int64_t n, bool padded, const SamplerRecord* s,
                            Explanation overlap) {
  const bool wholeOnEveryRank =
      !padded && std::all_of(consumed.ranks.begin(), consumed.ranks.end(), [&](const auto& shard) {
        return static_cast<std::int64_t>(std::set<Index>(shard.begin(), shard.end()).size()) == n;
      });
  if (wholeOnEveryRank) {
    return {fmt::format("every rank evaluates the whole set: the loader's {} is not split across "
                        "the ranks, so a metric summed or averaged over them counts each sample "
                        "{} times{}",
                        s ? s->className : std::string("sampler"), ranks.size(),
                        frameworkHint(*ranks[0].trace, ", as Trainer(use_distributed_sampler="
                                                       "False) leaves it")),
            "shard it with DistributedSampler(shuffle=False) (and drop its padding), or evaluate "
            "on one rank"};
  }
  if (padded) {
    return {fmt::format("DistributedSampler without drop_last pads every rank to ceil(N / W) "
                        "samples with copies of the first ones, so metrics summed over ranks "
                        "count those twice{}",
                        frameworkHint(*ranks[0].trace, " (Lightning puts that sampler under "
                                                       "its validation loaders: for an exact "
                                                       "metric validate on one device)")),
            "evaluate an unpadded shard (indices[rank::world_size]) or drop the duplicates when "
            "gathering results"};
  }
  if (!overlap.empty()) {
    overlap.cause = "the ranks' evaluation shards overlap, so metrics summed over ranks count "
                    "those samples twice: " + overlap.cause;
    return overlap;
  }
  return {"the ranks' evaluation shards overlap, so metrics summed over ranks count those "
          "samples twice",
          "give each rank a disjoint shard, or drop the duplicates when gathering results"};
}

// NOTE [Results gathered, then summed] (docs/audit.md): every sample evaluated once, every rank
// gathered the results after the pass (each then holds all of them), and an all_reduce after it
// summed the world size times the samples: each rank's sum of the gathered results was summed
// again across the ranks, and every sample counted once per rank.
void checkGatheredThenSummed(DataFindings& findings, std::int64_t loader, std::int64_t k,
                             const std::vector<RankPass>& ranks, const Partition& consumed) {
  const auto gather = gatheredAfter(ranks);
  const auto world = static_cast<std::int64_t>(ranks.size());
  if (!gather || world < 2) return;
  std::int64_t total = 0;
  for (const auto& shard : consumed.ranks) total += static_cast<std::int64_t>(shard.size());
  const std::set<double> sums = sumsAfterPass(ranks);
  if (total <= 0 || sums.count(static_cast<double>(world * total)) == 0 ||
      sums.count(static_cast<double>(total)) > 0)
    return;
  const CollectiveRecord* sum = nullptr;
  for (const CollectiveRecord* c : userCollectivesAfterPass(ranks[0])) {
    if (std::count(c->values.begin(), c->values.end(), static_cast<double>(world * total)) > 0)
      sum = c;
  }
  Violation v;
  v.property = std::string(property::kNoDuplicates);
  v.epoch = k;
  v.detail = fmt::format(
      "evaluation pass (every batch under no_grad) over {}: the ranks evaluated {} samples, each "
      "once, then every rank called {} and an all_reduce after it summed {}, {} x the {} "
      "samples{}",
      describeLoader(*ranks[0].trace, loader), total, *gather, world * total, world, total,
      sum && !sum->at.empty() ? fmt::format(" ({})", sum->at) : "");
  explain(v, {fmt::format("the results are gathered ({}: every rank then holds all {} of them) "
                          "and then summed across the ranks again (an all_reduce, or "
                          "self.log(…, sync_dist=True, reduce_fx=\"sum\")), so every sample is "
                          "counted {} times",
                          *gather, total, world),
              "reduce once: sum each rank's own results across the ranks, or compute the metric "
              "from the gathered results without reducing them again"});
  findings.record(loader, v);
}

// The samples of [0, n) no rank consumed in `ranks`' pass, or nothing when some rank's are unknown.
std::optional<std::set<Index>> leftOut(const std::vector<RankPass>& ranks, std::int64_t n) {
  std::set<Index> seen;
  for (const auto& rp : ranks) {
    if (!rp.consumed) return std::nullopt;
    seen.insert(rp.consumed->begin(), rp.consumed->end());
  }
  std::set<Index> out;
  for (Index i = 0; i < n; ++i) {
    if (!seen.count(i)) out.insert(i);
  }
  return out;
}

// Whether the ranks' pass is the tail of an earlier evaluation on every rank (NOTE [A tail
// evaluated on every rank]): exactly the samples that evaluation left out, judged with it.
bool isTailOfAnEvaluation(DataFindings& findings, const std::vector<RankPass>& ranks) {
  const RankTrace& t = *ranks[0].trace;
  const PassRecord& p = *ranks[0].pass;
  const LoaderRecord& l = t.loaders.at(p.loader);
  if (!l.subsetIndices || l.subsetIndices->empty()) return false;
  const std::set<Index> tail(l.subsetIndices->begin(), l.subsetIndices->end());
  for (const auto& main : t.passes) {
    if (main.loader == p.loader || main.endLine > p.startLine || !isEvaluation(main) ||
        main.datasetLen != l.subsetOf || tailPassOn(t, main, tail) != &p)
      continue;
    const auto mains = passAcrossRanks(findings.trace(), main.loader, main.iter, findings.orders());
    if (mains.size() != ranks.size()) continue;
    if (leftOut(mains, main.datasetLen) == std::optional<std::set<Index>>(tail)) return true;
  }
  return false;
}

// no-duplicates of what the ranks evaluated, over one dataset of `n` samples.
void checkCountedOnce(DataFindings& findings, std::int64_t loader, std::int64_t k, std::int64_t n,
                      const std::vector<RankPass>& ranks, const Partition& consumed) {
  if (isTailOfAnEvaluation(findings, ranks)) return;  // judged with the evaluation it completes
  auto v = checkNoDuplicates(consumed);
  if (!v) {
    checkGatheredThenSummed(findings, loader, k, ranks, consumed);
    return;
  }
  std::int64_t total = 0;
  std::set<Index> distinct;
  for (const auto& shard : consumed.ranks) {
    total += static_cast<std::int64_t>(shard.size());
    distinct.insert(shard.begin(), shard.end());
  }
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  // DistributedSampler's padding: its copies are the duplicates, no more (a sampler given another
  // rank or num_replicas than its process's overlaps instead).
  const auto world = static_cast<std::int64_t>(ranks.size());
  const bool padded = s && s->order == OrderKind::kTorchDistributed &&
                      !ranks[0].pass->dropLast.value_or(false) &&
                      s->numReplicas.value_or(world) == world &&
                      total - static_cast<std::int64_t>(distinct.size()) ==
                          sampler::distributedTotalSize(n, world, false) - n;
  if (const auto gather = gatheredAfter(ranks)) {
    // NOTE [Padding that is gathered] (docs/audit.md): the duplicates hurt only a metric that
    // counts them; a program that gathers its results after the pass can keep each index once,
    // and the trace cannot see whether it does. Said, never failed.
    findings.notApplicable(loader, fmt::format(
        "its evaluation hands out {} samples for {} distinct{}, and every rank calls {} after "
        "it: if the gathered results are keyed by sample index and kept once, the metric counts "
        "each sample once (the trace cannot see whether they are)",
        total, distinct.size(), padded ? " (DistributedSampler's padding)" : "", *gather));
    return;
  }
  if (!resultsCombinedByACollective(ranks)) {
    // NOTE [Results combined out of sight] (docs/audit.md): no collective after the pass could
    // carry the results (only barriers and broadcasts): they are combined elsewhere (files that
    // rank 0 reads, mmcv's collect_results_cpu) or not at all, and the trace cannot see a metric
    // count the copies. Said, never failed.
    findings.notApplicable(loader, fmt::format(
        "its evaluation hands out {} samples for {} distinct{}, and no collective after it "
        "reduces or gathers results (the ranks' results are combined out of the trace's sight, "
        "through files, or not at all): keep each sample once where they are combined",
        total, distinct.size(), padded ? " (DistributedSampler's padding)" : ""));
    return;
  }
  if (countedOnceBySums(ranks, total, static_cast<std::int64_t>(distinct.size()))) {
    findings.notApplicable(loader, fmt::format(
        "its evaluation hands out {} samples for {} distinct{}, and the all_reduce after it "
        "summed {}, the distinct samples: the program counts each sample once (its padding "
        "masked out)",
        total, distinct.size(), padded ? " (DistributedSampler's padding)" : "", distinct.size()));
    return;
  }
  v->detail = fmt::format(
      "evaluation pass (every batch under no_grad) over {}: the ranks evaluated {} samples for "
      "{} distinct, {} counted twice{}; {}",
      describeLoader(*ranks[0].trace, loader), total, distinct.size(),
      total - static_cast<std::int64_t>(distinct.size()),
      padded
          ? fmt::format(" (DistributedSampler pads {} samples to {} ranks x {})", n, ranks.size(),
                        distributedNumSamples(n, static_cast<std::int64_t>(ranks.size()), false))
          : "",
      v->detail);
  Explanation why = duplicatesCause(
      ranks, consumed, n, padded, s,
      padded ? Explanation{}
             : partitionCause(ranks, std::string(property::kDisjointness), v->ranks,
                              findings.trace()));
  explain(*v, std::move(why));
  findings.record(loader, *v);
}

}  // namespace

void checkEvaluation(DataFindings& findings, std::int64_t loader, std::int64_t k,
                     const std::vector<RankPass>& ranks) {
  if (!evaluatedOnEveryRank(ranks) || !allKnown(ranks, true)) return;
  if (eachRankItsOwnDataset(loader, ranks)) {
    findings.notApplicable(loader, fmt::format("each rank evaluates a dataset of its own under {}, "
                                               "which does not split one dataset across ranks "
                                               "(their listings or rows differ): no evaluation "
                                               "across ranks is judged",
                                               samplerClass(ranks[0])));
    return;
  }
  const auto n = commonDatasetLen(findings, loader, k, ranks);
  if (!n) return;
  const Partition consumed = partitionOf(ranks, *n, k, true);
  findings.judged(property::kNoDuplicates);
  findings.judged(property::kCoverage);
  checkEvaluatedOnce(findings, loader, k, ranks, consumed);
  checkCountedOnce(findings, loader, k, *n, ranks, consumed);
}

}  // namespace ddph::audit
