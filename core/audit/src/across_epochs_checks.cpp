// What only a loader's whole run shows, beyond each epoch alone (NOTE [Across epochs],
// docs/audit.md):
//  - coverage over the run: every epoch leaves out the same samples (DataLoader(drop_last=True)
//    over an order that never changes), so they are trained in none;
//  - a cached loader: its sampler's epoch moves on after the loader's last pass, while training
//    goes on, so its batches come from a cache (itertools.cycle) that repeats one order (reshuffle).
// Each epoch alone is healthy in both: a dropped partial batch, one pass that ran to its end.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Index;
using sampler::Violation;
namespace property = sampler::property;

namespace {

// The indices of [0, n) that no rank consumed in training pass `k` of `loader`, or nothing when
// some rank has no such pass, the pass is not a complete training pass, or what it consumed is
// not known.
std::optional<std::vector<Index>> leftOutOfEpoch(const Trace& trace, std::int64_t loader,
                                                 std::int64_t k, std::int64_t& n,
                                                 OrderCache& cache) {
  std::vector<char> seen;
  for (const auto& t : trace.ranks) {
    if (!t) return std::nullopt;
    const PassRecord* p = t->findPass(loader, k);
    if (!p || !trainsOnBatches(*p) || !completePass(*p)) return std::nullopt;
    if (n < 0) n = p->datasetLen;
    if (p->datasetLen != n || n <= 0) return std::nullopt;
    const auto consumed = consumedIndices(*t, *p, samplerOrder(*t, *p, cache));
    if (!consumed) return std::nullopt;
    seen.resize(static_cast<std::size_t>(n), 0);
    for (Index i : *consumed) {
      if (i < 0 || i >= n) return std::nullopt;  // valid-range's finding, not this one
      seen[static_cast<std::size_t>(i)] = 1;
    }
  }
  std::vector<Index> missing;
  for (Index i = 0; i < n; ++i) {
    if (!seen[static_cast<std::size_t>(i)]) missing.push_back(i);
  }
  return missing;
}

// Why every epoch leaves out the same samples, from the loader's and the sampler's settings.
std::string leftOutCause(const LoaderRecord& l, const SamplerRecord& s, std::int64_t world) {
  const bool shuffles = s.shuffle.value_or(false);
  const std::string order =
      shuffles ? "the order does not change between epochs (set_epoch is not reaching the sampler)"
               : fmt::format("{}(shuffle=False) gives every epoch the same order",
                             s.className.substr(s.className.rfind('.') + 1));
  if (l.dropLast) {
    return fmt::format(
        "DataLoader(drop_last=True) drops each rank's last partial batch, and {}, so the same "
        "samples are dropped in every epoch; shuffle (with set_epoch every epoch, so that the "
        "dropped samples change), or use drop_last=False, or a batch size that divides each "
        "rank's share",
        order);
  }
  if (s.dropLast.value_or(false)) {
    return fmt::format(
        "DistributedSampler(drop_last=True) drops the N % {} samples at the end of the order so "
        "that every rank gets as many, and {}, so the same ones are dropped in every epoch; "
        "shuffle with set_epoch, or drop_last=False",
        world, order);
  }
  return fmt::format("every epoch's loop leaves out the same part of an order that never changes "
                     "({}); shuffle with set_epoch, or iterate the whole loader",
                     order);
}

// What one rank shows of a loader whose batches came from a cache: the epochs its sampler was
// given after the loader's last pass ran out, each followed by training on another loader.
struct LateEpochs {
  std::vector<std::int64_t> epochs;  ///< the set_epoch values after the loader's last pass
  std::int64_t passes = 0;           ///< the loader's passes
  std::int64_t otherLoader = -1;     ///< the loader training went on over
  std::int64_t laterPasses = 0;      ///< its passes after the loader's last
  /// Optimizer steps after the loader's last pass ran out while no loader made a pass: the
  /// training went on over batches no loader handed out (when there is no other loader).
  std::int64_t stepsFromNowhere = 0;
};

// The optimizer steps of rank `t` after trace line `line` while no loader's training pass began
// (an evaluation between them trains nothing).
std::int64_t stepsWithoutAPass(const RankTrace& t, std::int64_t line) {
  std::int64_t until = std::numeric_limits<std::int64_t>::max();
  for (const auto& q : t.passes) {
    if (q.startLine > line && trainsOnBatches(q)) until = std::min(until, q.startLine);
  }
  const auto from = std::upper_bound(t.stepLines.begin(), t.stepLines.end(), line);
  const auto to = std::lower_bound(t.stepLines.begin(), t.stepLines.end(), until);
  return from < to ? static_cast<std::int64_t>(to - from) : 0;
}

// Nothing unless the loader's sampler shuffles, every pass of it trained and the last ran to its
// end, and its sampler was given an epoch afterwards that training on another loader followed.
std::optional<LateEpochs> lateEpochsOn(const RankTrace& t, std::int64_t loader) {
  const SamplerRecord* s = samplerOf(t, loader);
  if (!s || !s->shuffle.value_or(s->order == OrderKind::kTorchDistributed)) return std::nullopt;
  LateEpochs out;
  const PassRecord* last = nullptr;
  for (const auto& p : t.passes) {
    if (p.loader != loader) continue;
    if (!trainsOnBatches(p)) return std::nullopt;  // an evaluation's order harms nothing
    last = &p;
    ++out.passes;
  }
  if (!last || !last->ended) return std::nullopt;
  // set_epoch calls after the last pass ran out, each followed by training on another loader,
  // or by optimizer steps on batches no loader handed out: at least a pass's worth of them
  // (NOTE [A loader fed from a cache], docs/audit.md: `next(itertools.cycle(loader))` in a loop
  // of steps).
  // Its last batch: a loop of next() calls runs the pass out only at the next epoch's first
  // call, after that epoch's set_epoch.
  const std::int64_t lastBatch = last->batches.empty() ? last->endLine : last->batches.back().line;
  const auto afterEnd = static_cast<std::size_t>(stepsWithoutAPass(t, lastBatch));
  const bool fromNowhere = afterEnd > 0 && afterEnd > last->batches.size();
  for (const auto& c : s->setEpochCalls) {
    if (c.line < last->endLine && !(fromNowhere && c.line > lastBatch)) continue;
    bool followed = false;
    for (const auto& q : t.passes) {
      if (q.loader != loader && q.startLine > c.line && trainsOnBatches(q)) {
        out.epochs.push_back(c.epoch);
        out.otherLoader = q.loader;
        followed = true;
        break;
      }
    }
    if (!followed && fromNowhere && stepsWithoutAPass(t, c.line) > 0) {
      out.epochs.push_back(c.epoch);
    }
  }
  for (const auto& q : t.passes) {
    if (q.loader == out.otherLoader && q.startLine > last->endLine) ++out.laterPasses;
  }
  if (out.otherLoader < 0) out.stepsFromNowhere = static_cast<std::int64_t>(afterEnd);
  if (out.epochs.empty()) return std::nullopt;
  return out;
}

}  // namespace

std::optional<Violation> neverTrainedInAnyEpoch(const Trace& trace, std::int64_t loader,
                                                OrderCache& cache) {
  const RankTrace* first = nullptr;
  for (const auto& t : trace.ranks) {
    if (!t) return std::nullopt;
    if (!first) first = &*t;
  }
  if (!first) return std::nullopt;
  const SamplerRecord* s = samplerOf(*first, loader);
  // One dataset split across the ranks, without replacement: only then is an index one sample
  // every rank could have trained.
  if (!s || s->replacement.value_or(false) ||
      !(s->order == OrderKind::kTorchDistributed || s->numReplicas)) {
    return std::nullopt;
  }
  std::int64_t n = -1, epochs = 0;
  std::optional<std::vector<Index>> leftOut;
  for (std::int64_t k = 0;; ++k) {
    const auto missing = leftOutOfEpoch(trace, loader, k, n, cache);
    if (!missing) {
      // Every pass of the loader is judged, or none: a pass cut short or not known on some rank
      // is the per-epoch checks' to name.
      for (const auto& t : trace.ranks) {
        for (const auto& p : t->passes) {
          if (p.loader == loader && p.iter >= k) return std::nullopt;
        }
      }
      break;
    }
    if (leftOut && *missing != *leftOut) return std::nullopt;  // other samples in another epoch
    leftOut = missing;
    ++epochs;
  }
  if (epochs < 2 || !leftOut || leftOut->empty()) return std::nullopt;
  Violation v;
  v.property = std::string(property::kCoverage);
  v.epoch = 0;
  v.detail = fmt::format(
      "{}: {} of its {} samples ({}) were trained in none of its {} epochs: every epoch left out "
      "the same ones",
      describeLoader(*first, loader), leftOut->size(), n, describeIndices(*leftOut), epochs);
  v.likelyCause = leftOutCause(first->loaders.at(loader), *s, trace.worldSize);
  return v;
}

std::optional<Violation> replayedFromACache(const Trace& trace, std::int64_t loader) {
  const RankTrace* first = nullptr;
  LateEpochs late;
  for (const auto& t : trace.ranks) {
    if (!t || !t->endedNormally()) return std::nullopt;
    const std::optional<LateEpochs> onRank = lateEpochsOn(*t, loader);
    if (!onRank) return std::nullopt;
    if (!first) {
      first = &*t;
      late = *onRank;
    }
  }
  if (!first) return std::nullopt;
  const SamplerRecord& s = *samplerOf(*first, loader);
  Violation v;
  v.property = std::string(property::kReshuffle);
  v.epoch = late.epochs.front();
  std::vector<std::string> calls;
  for (auto e : late.epochs) calls.push_back(fmt::format("set_epoch({})", e));
  const std::string wentOn =
      late.otherLoader >= 0
          ? fmt::format("{}: {} more pass{}", describeLoader(*first, late.otherLoader),
                        late.laterPasses, late.laterPasses == 1 ? "" : "es")
          : fmt::format("{} optimizer steps on rank {} after its last batch was handed out, "
                        "with no other loader's pass begun",
                        late.stepsFromNowhere, first->rank);
  v.detail = fmt::format(
      "{}: it was iterated {} time{}, its last pass to its end, but {} {} called on its sampler "
      "{} ({}) afterwards while training went on ({}): no pass drew those epochs' orders, so the "
      "batches it served after its last pass came from a cache that repeats one order",
      describeLoader(*first, loader), late.passes, late.passes == 1 ? "" : "s",
      fmt::join(calls, ", "), calls.size() == 1 ? "was" : "were", s.id, s.className, wentOn);
  v.likelyCause =
      "the loader is wrapped in something that keeps its first pass, such as "
      "itertools.cycle(loader), which saves every batch of the first pass and replays them in the "
      "same order (the same samples in the same batches every epoch), so set_epoch reaches "
      "nothing";
  v.help = "make a new iterator when it runs out instead (on StopIteration: it = iter(loader))";
  return v;
}

}  // namespace ddph::audit
