// What a pass dropped before its end consumed (zip over loaders of different lengths, break,
// islice): coverage of the indices the ranks' batches held, when some rank left the pass early
// while its partition was healthy. Left out by design, a note instead: a loader's own drop_last,
// a batch budget every training pass is cut by (NOTE [A batch budget]), a run that ended inside
// the epoch (NOTE [A run that ends inside a pass]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "data_checks.h"

namespace ddph::audit {

using sampler::checkCoverage;
using sampler::Expectations;
using sampler::Index;
using sampler::Partition;
namespace property = sampler::property;

namespace {

// NOTE [A batch budget] (docs/audit.md, "A run that ends inside a pass"): every training pass of
// the loader, on every rank, handed out the same number of batches, fewer than the pass holds,
// and was left (limit_train_batches, a steps-per-epoch cap; the last may be shorter: max_steps),
// while its sampler drew a new order each epoch. Each epoch leaves other samples out by design:
// a note. With the same order every epoch the same samples are never trained: coverage.
bool everyPassCutAlike(std::int64_t loader, const std::vector<RankPass>& ranks) {
  for (const auto& rp : ranks) {
    std::vector<const PassRecord*> passes;
    for (const auto& p : rp.trace->passes) {
      if (p.loader == loader && trainsOnBatches(p)) passes.push_back(&p);
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

// The optimizer steps rank `t` took during pass `p` (its `step` lines between the pass's start
// and the loader's next pass), or nothing when steps are not recorded.
std::optional<std::int64_t> stepsDuring(const RankTrace& t, const PassRecord& p) {
  if (t.stepLines.empty()) return std::nullopt;
  const std::int64_t end = nextPassLine(t, p);
  return std::count_if(t.stepLines.begin(), t.stepLines.end(),
                       [&](std::int64_t l) { return l > p.startLine && l < end; });
}

// NOTE [A miscounted batch budget] (docs/audit.md): the cut of everyPassCutAlike made by the
// program's own loop (no framework drove it: no limit_train_batches was asked for) at a count
// that is a known miscount, some of whose samples no epoch trained.
// The count of batches each pass stopped at, when it is a known miscount of the loop's own
// arithmetic: len(loader) divided by the world size again, or whole accumulation windows only. A
// budget of another size (a deliberate cap) gives nothing: the trace cannot tell it is wrong.
std::optional<Explanation> miscountedBudget(const RankPass& rp, std::int64_t used, std::int64_t world) {
  const std::int64_t len = rp.pass->declaredBatches.value_or(0);
  const auto steps = stepsDuring(*rp.trace, *rp.pass);
  if (len > 0 && world > 1 && used == len / world) {
    return Explanation{fmt::format("each pass stops after len(loader) // world_size = {} // {} = {} batches: "
                        "len(loader) is already each rank's share (the DistributedSampler divides "
                        "the dataset by the {} ranks), so dividing it again trains 1/{} of each "
                        "epoch",
                        len, world, used, world, world),
            "iterate the loader to its end (for batch in loader), or count steps as "
            "len(loader) without dividing by the world size"};
  }
  if (len > 0 && steps && *steps > 0 && used % *steps == 0 && used / *steps > 1 &&
      len % (used / *steps) != 0 && used == len / (used / *steps) * (used / *steps)) {
    const std::int64_t a = used / *steps;
    return Explanation{fmt::format("each pass takes {} optimizer steps of {} micro-batches ({} batches, "
                        "len(loader) // {} whole accumulation windows), so the last {} % {} = {} "
                        "batches of every epoch are never drawn",
                        *steps, a, used, a, len, a, len % a),
            "run the last, shorter accumulation window too (math.ceil(len(loader) / accum) "
            "windows, stepping after the last batch), or iterate the loader to its end"};
  }
  return std::nullopt;
}

// A loader's own drop_last leaves each rank's last partial batch out by design: some rank that
// dropped the pass consumed all its full batches.
bool onlyTheLoadersDropLast(const LoaderRecord& l, const std::vector<RankPass>& ranks,
                            const Partition& consumed) {
  if (!l.dropLast || l.batchSize <= 0) return false;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].dropped) continue;
    const auto full = static_cast<std::int64_t>(ranks[r].order->size()) / l.batchSize * l.batchSize;
    if (static_cast<std::int64_t>(consumed.ranks[r].size()) >= full) return true;
  }
  return false;
}

std::int64_t distinctIndices(const Partition& part) {
  std::set<Index> distinct;
  for (const auto& shard : part.ranks) distinct.insert(shard.begin(), shard.end());
  return static_cast<std::int64_t>(distinct.size());
}

// "ranks 0, 1 used 3 of 8 batches; rank 2 used 4 of 8 batches" (zip's discarded batch not used).
std::vector<std::string> batchesUsed(const std::vector<RankPass>& ranks) {
  std::map<std::string, std::vector<std::int64_t>> byCount;
  for (const auto& rp : ranks) {
    const auto batches = static_cast<std::int64_t>(rp.pass->batches.size()) -
                         (lastBatchDiscarded(*rp.trace, *rp.pass) ? 1 : 0);
    const std::string of = rp.pass->declaredBatches
                               ? fmt::format("{} of {} batches", batches, *rp.pass->declaredBatches)
                               : fmt::format("{} batches", batches);
    byCount[of].push_back(rp.trace->rank);
  }
  std::vector<std::string> took;
  for (const auto& [of, rs] : byCount) took.push_back(fmt::format("{} used {}", rankList(rs), of));
  return took;
}

// A pass cut by a batch budget, or by the run's end: a note, and true.
bool leftOutByDesign(DataFindings& findings, std::int64_t loader, std::int64_t k,
                     const std::vector<RankPass>& ranks, const std::vector<std::string>& took,
                     std::int64_t unseen) {
  if (everyPassCutAlike(loader, ranks)) {
    const auto used = static_cast<std::int64_t>(ranks[0].pass->batches.size());
    const auto miscount = ranks[0].trace->framework.empty()
                              ? miscountedBudget(ranks[0], used, static_cast<std::int64_t>(ranks.size()))
                              : std::nullopt;
    const auto never = miscount ? findings.neverTrained(loader, ranks) : std::nullopt;
    if (never && never->first > 0) {
      sampler::Violation v;
      v.property = std::string(property::kCoverage);
      v.epoch = k;
      v.detail = fmt::format(
          "{}: every training pass stopped at {} of its {} batches on every rank, so each epoch "
          "leaves samples out, and {} of the {} samples were never trained in the whole run",
          describeLoader(*ranks[0].trace, loader), used,
          ranks[0].pass->declaredBatches ? std::to_string(*ranks[0].pass->declaredBatches)
                                         : std::string("?"),
          never->first, never->second);
      explain(v, *miscount);
      findings.record(loader, v, "budget");
      return true;
    }
    findings.notApplicable(loader, fmt::format(
        "every training pass was cut at {} of its {} batches on every rank (a batch budget: "
        "limit_train_batches, a steps-per-epoch cap, a break after N steps), and its sampler "
        "draws a new order every epoch, so other samples are left out each time; the samples "
        "no epoch reached are not judged",
        ranks[0].pass->batches.size(),
        ranks[0].pass->declaredBatches ? std::to_string(*ranks[0].pass->declaredBatches)
                                       : std::string("(len unknown)")));
    return true;
  }
  if (std::all_of(ranks.begin(), ranks.end(), [](const RankPass& rp) {
        return isEvaluation(*rp.pass) && !completePass(*rp.pass);
      })) {
    findings.notApplicable(loader, fmt::format(
        "an evaluation pass was cut before its end ({}): an evaluation budget (limit_val_batches, "
        "a break after N batches) or a sanity check; the {} samples it did not reach were not "
        "evaluated, and are not judged (no training step used them)",
        fmt::join(took, "; "), unseen));
    return true;
  }
  if (std::all_of(ranks.begin(), ranks.end(), [](const RankPass& rp) {
        return runEndsInside(*rp.trace, *rp.pass);
      })) {
    findings.notApplicable(loader, fmt::format(
        "the run ended inside epoch {} ({}): a step budget (max_steps, a time limit) or a job "
        "stopped to be resumed; the {} samples it did not reach are not judged, since no later "
        "epoch of this run could have trained them (each job is audited alone: a resumed job's "
        "first epoch is not checked against this one)",
        k, fmt::join(took, "; "), unseen));
    return true;
  }
  return false;
}

// What the ranks consumed of a pass of a batch sampler of the program's own, as a partition, when
// it misses samples its sampler's orders hold (the sampler's own split is whole): the batch
// sampler, not the sampler, left them out. Nothing otherwise.
std::optional<Partition> consumedShortOfItsSampler(std::int64_t loader, std::int64_t k,
                                                   const std::vector<RankPass>& ranks) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  Expectations e;
  e.dropLast = ranks[0].pass->dropLast.value_or(s && s->dropLast.value_or(false));
  Partition consumed = partitionOf(ranks, ranks[0].pass->datasetLen, k, true);
  const Partition drawn = partitionOf(ranks, ranks[0].pass->datasetLen, k, false);
  if (!checkCoverage(consumed, e) || checkCoverage(drawn, e)) return std::nullopt;
  return consumed;
}

// NOTE [A batch sampler that stops short] (docs/audit.md): a batch_sampler of the program's own
// whose passes end (StopIteration) with fewer batches than len(loader), its __len__, promises on
// every rank, leaving samples of its sampler's order undrawn, some of which no epoch trained: an
// off-by-one in its __iter__. Recorded, and true, or false.
bool batchSamplerStopsShort(DataFindings& findings, std::int64_t loader, std::int64_t k,
                            const std::vector<RankPass>& ranks) {
  const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
  if (l.torchBatching || !allKnown(ranks, true) || !allKnown(ranks, false)) return false;
  for (const auto& rp : ranks) {
    const PassRecord& p = *rp.pass;
    if (!p.ended || !p.declaredBatches || !trainsOnBatches(p) ||
        static_cast<std::int64_t>(p.batches.size()) >= *p.declaredBatches) {
      return false;
    }
  }
  const auto consumed = consumedShortOfItsSampler(loader, k, ranks);
  if (!consumed) return false;
  const auto never = findings.neverTrained(loader, ranks);
  if (!never || never->first == 0) return false;
  const std::int64_t seen = distinctIndices(*consumed);
  sampler::Violation v;
  v.property = std::string(property::kCoverage);
  v.epoch = k;
  v.detail = fmt::format(
      "{}: every rank's pass ended with fewer batches than len(loader) promises ({}), so only {} "
      "of its {} samples were drawn in this epoch, and {} samples were never trained in the whole "
      "run",
      describeLoader(*ranks[0].trace, loader), fmt::join(batchesUsed(ranks), "; "), seen,
      consumed->datasetSize, never->first);
  v.likelyCause =
      "the loader's batch_sampler, a class of the program's own, stops before its own __len__: its "
      "__iter__ never yields the last batch of the indices its sampler hands it (an off-by-one "
      "in its range, such as range(0, len(indices) - batch_size, batch_size)), so every epoch "
      "leaves each rank's last batch out";
  v.help = "yield every batch (range(0, len(indices), batch_size), the last one shorter, or "
           "dropped only when it is partial and drop_last is asked for)";
  findings.judged(property::kCoverage);
  findings.record(loader, v, "batch-sampler");
  return true;
}

// NOTE [A batch sampler longer than its __len__] (docs/audit.md): a batch_sampler of the program's
// own whose every pass was left after len(loader) batches (a loop of len(loader) steps, as
// torchvision's detection reference and Lightning run) before its StopIteration, while the
// batches handed out, a short one among them, held only part of its sampler's shard: it yields
// more batches than its __len__ counts (groups flushed last), and the loop never reaches them.
bool batchSamplerLongerThanItsLen(DataFindings& findings, std::int64_t loader, std::int64_t k,
                                  const std::vector<RankPass>& ranks) {
  const LoaderRecord& l = ranks[0].trace->loaders.at(loader);
  if (l.torchBatching || !allKnown(ranks, true) || !allKnown(ranks, false)) return false;
  for (const auto& rp : ranks) {
    const PassRecord& p = *rp.pass;
    if (!p.leftAtItsLength || !p.declaredBatches || !trainsOnBatches(p) ||
        static_cast<std::int64_t>(p.batches.size()) != *p.declaredBatches) {
      return false;
    }
    // A short batch among those handed out: the sampler flushes partial batches rather than
    // dropping a remainder by design, so the samples it had not yet yielded were still to come.
    if (l.batchSize <= 0 || std::none_of(p.batches.begin(), p.batches.end(), [&](const BatchRecord& b) {
          return b.size < l.batchSize;
        }))
      return false;
  }
  const auto consumed = consumedShortOfItsSampler(loader, k, ranks);
  if (!consumed) return false;
  std::vector<std::string> held;
  for (const auto& rp : ranks) {
    held.push_back(fmt::format("rank {}: {} of {}", rp.trace->rank, rp.consumed->size(),
                               rp.order->size()));
  }
  const std::int64_t seen = distinctIndices(*consumed);
  sampler::Violation v;
  v.property = std::string(property::kCoverage);
  v.epoch = k;
  v.detail = fmt::format(
      "{}: every rank's pass was left after len(loader) = {} batches, before the batch sampler "
      "ran out, and those batches held only part of the samples its sampler gave the rank ({}): "
      "{} of its {} samples were not trained in this epoch",
      describeLoader(*ranks[0].trace, loader), *ranks[0].pass->declaredBatches,
      fmt::join(held, "; "), consumed->datasetSize - seen, consumed->datasetSize);
  v.likelyCause =
      "the loader's batch_sampler, a class of the program's own, yields more batches than its "
      "__len__ counts (its partly filled groups flushed at the end, beyond len(sampler) // "
      "batch_size), and a loop of len(loader) steps (for _ in range(len(loader)): next(it)) never "
      "reaches them";
  v.help = "make __len__ count every batch __iter__ yields (the flushed groups too), or iterate "
           "the loader to its StopIteration";
  findings.judged(property::kCoverage);
  findings.record(loader, v, "batch-sampler");
  return true;
}

// NOTE [Steps cut to the shortest rank] (docs/audit.md): the ranks' loaders hold different numbers
// of batches (shards of other sizes: files split across ranks), and every rank's training pass
// stopped at the shortest one's count (a step count agreed with all_reduce(MIN), zip with
// range(min)): the longer ranks' remaining samples are never trained in the epoch. The coverage
// finding, recorded; false when the pass is not that.
bool cutToTheShortestRank(DataFindings& findings, std::int64_t loader, std::int64_t k,
                          const std::vector<RankPass>& ranks) {
  std::map<std::int64_t, std::vector<std::int64_t>> byLength;
  std::set<std::size_t> used;
  for (const auto& rp : ranks) {
    if (!trainsOnBatches(*rp.pass) || !rp.pass->declaredBatches || !rp.consumed) return false;
    byLength[*rp.pass->declaredBatches].push_back(rp.trace->rank);
    used.insert(rp.pass->batches.size());
  }
  if (byLength.size() < 2 || used.size() != 1 ||
      static_cast<std::int64_t>(*used.begin()) != byLength.begin()->first) {
    return false;
  }
  std::set<Index> trained;
  for (const auto& rp : ranks) trained.insert(rp.consumed->begin(), rp.consumed->end());
  const std::int64_t n = ranks[0].pass->datasetLen;
  const std::int64_t left = n - static_cast<std::int64_t>(trained.size());
  if (left <= 0) return false;
  std::vector<std::string> lengths;
  for (const auto& [len, rs] : byLength) lengths.push_back(fmt::format("{}: {}", rankList(rs), len));
  sampler::Violation v;
  v.property = std::string(property::kCoverage);
  v.epoch = k;
  v.detail = fmt::format(
      "{}, {}: the ranks' loaders hold different numbers of batches ({}), and every rank's pass "
      "stopped at the shortest one's {}: {} of the {} samples were trained by no rank in this "
      "epoch",
      describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]), fmt::join(lengths, "; "),
      *used.begin(), left, n);
  explain(v, {fmt::format("the ranks' shards differ in size (whole files, or records, split "
                          "across the ranks unevenly) and the loop trains only the shortest "
                          "shard's {} batches on every rank (a step count agreed with "
                          "all_reduce(MIN), zip with range(n)), so the longer ranks' remaining "
                          "samples are never trained in an epoch",
                          *used.begin()),
              "split the samples evenly across the ranks (DistributedSampler pads the shards "
              "to one length), or let the longer ranks finish under torch's Join"});
  findings.record(loader, v, "consumed");
  return true;
}

void checkConsumedInGroup(DataFindings& findings, std::int64_t loader, std::int64_t k,
                          const std::vector<RankPass>& ranks) {
  if (batchSamplerStopsShort(findings, loader, k, ranks)) return;
  if (batchSamplerLongerThanItsLen(findings, loader, k, ranks)) return;
  if (cutToTheShortestRank(findings, loader, k, ranks)) return;
  const bool anyDropped = std::any_of(ranks.begin(), ranks.end(),
                                      [](const RankPass& rp) { return rp.dropped; });
  if (!anyDropped || !allKnown(ranks, true) || !allKnown(ranks, false)) return;
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  Expectations e;
  e.dropLast = ranks[0].pass->dropLast.value_or(s && s->dropLast.value_or(false));
  const Partition consumed = partitionOf(ranks, ranks[0].pass->datasetLen, k, true);
  if (onlyTheLoadersDropLast(ranks[0].trace->loaders.at(loader), ranks, consumed)) return;
  auto v = checkCoverage(consumed, e);
  if (!v) return;
  const std::int64_t seen = distinctIndices(consumed);
  const std::vector<std::string> took = batchesUsed(ranks);
  const RankPass& dropped = *std::find_if(ranks.begin(), ranks.end(),
                                          [](const RankPass& rp) { return rp.dropped; });
  const PassRecord* partnerPass = exhaustedPartner(*dropped.trace, *dropped.pass);
  const std::int64_t partner = partnerPass ? partnerPass->loader : -1;
  if (partner < 0 &&
      leftOutByDesign(findings, loader, k, ranks, took, consumed.datasetSize - seen)) {
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
  findings.record(loader, *v, "consumed");
}

}  // namespace

void checkConsumed(DataFindings& findings, std::int64_t loader, std::int64_t k,
                   const std::vector<RankPass>& ranks) {
  for (const auto& group : splitGroups(ranks, loader)) checkConsumedInGroup(findings, loader, k, group);
}

}  // namespace ddph::audit
