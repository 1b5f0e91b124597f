// NOTE [A sampler that draws a subset] (docs/audit.md): a sampler of the program's own whose ranks
// split, without overlap, fewer samples than the dataset holds (an undersampler that balances the
// classes, a curriculum) never promised every sample each epoch. Its coverage is judged over the
// run: a new subset each epoch is its design (a note); the very same subset in every epoch leaves
// the same samples out of the whole run (coverage), which the cause says.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "data_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// The samples the ranks drew in a pass, or nothing when some order is unknown.
std::optional<std::set<sampler::Index>> drawnIn(const std::vector<RankPass>& ranks) {
  if (ranks.empty()) return std::nullopt;
  std::set<sampler::Index> drawn;
  for (const auto& rp : ranks) {
    if (!rp.order) return std::nullopt;
    drawn.insert(rp.order->begin(), rp.order->end());
  }
  return drawn;
}

// The training passes of `loader` on rank 0, by epoch.
std::vector<std::int64_t> trainingEpochs(const RankTrace& t, std::int64_t loader) {
  std::vector<std::int64_t> epochs;
  for (const auto& p : t.passes) {
    if (p.loader == loader && !isEvaluation(p)) epochs.push_back(p.iter);
  }
  return epochs;
}

// The DistributedSampler whose order sampler `s` yields: `s` itself (a subclass), or the one it
// holds (a wrapper that skips its head: built before it, over the same samples, drawn by no
// loader), or null.
const SamplerRecord* distributedBehind(const RankTrace& t, const SamplerRecord& s) {
  if (s.numReplicas) return &s;
  const SamplerRecord* held = nullptr;
  for (const auto& entry : t.samplers) {
    const std::int64_t id = entry.first;
    const SamplerRecord& o = entry.second;
    if (id < s.id && o.order == OrderKind::kTorchDistributed && o.datasetLen == s.datasetLen &&
        !drawnByALoader(t, id))
      held = &o;
  }
  return held;
}

// DistributedSampler's whole order for pass `p` of a loader drawing from `s` (or a wrapper of
// it): the pass's sampler epoch, else the last epoch given to `s` before the pass.
std::optional<std::vector<sampler::Index>> distributedOrderBehind(const RankTrace& t,
                                                                  const PassRecord& p,
                                                                  OrderCache& cache) {
  const SamplerRecord* s = samplerOf(t, p.loader);
  const SamplerRecord* ds = s ? distributedBehind(t, *s) : nullptr;
  if (!ds) return std::nullopt;
  if (ds == s) return distributedOrder(*ds, p, cache);
  PassRecord shape;
  shape.datasetLen = p.datasetLen;
  shape.shuffle = ds->shuffle;
  std::int64_t epoch = 0;
  for (const auto& c : s->setEpochCalls) {
    if (c.line < p.startLine) epoch = c.epoch;
  }
  shape.samplerEpoch = epoch;
  return distributedOrder(*ds, shape, cache);
}

// NOTE [A resume offset that outlives its epoch] (docs/audit.md): how many samples each rank's
// order skipped at the head of DistributedSampler's order for its pass (a sampler that resumes
// an epoch by dropping what was trained before the interruption); nothing unless every rank's
// order is that order's tail, with one count skipped, above 0.
std::optional<std::size_t> skippedHead(const std::vector<RankPass>& ranks, OrderCache& cache) {
  std::optional<std::size_t> skipped;
  for (const auto& rp : ranks) {
    if (!rp.order) return std::nullopt;
    const auto full = distributedOrderBehind(*rp.trace, *rp.pass, cache);
    if (!full || rp.order->size() >= full->size()) return std::nullopt;
    const std::size_t skip = full->size() - rp.order->size();
    if (!std::equal(rp.order->begin(), rp.order->end(), full->begin() + skip)) return std::nullopt;
    if (skipped && *skipped != skip) return std::nullopt;
    skipped = skip;
  }
  return skipped;
}

// NOTE [An epoch resumed in the same process] (docs/audit.md): the training pass of another loader
// over the same samples that stopped inside the epoch before pass `resumed` began (the program
// caught its interruption and built its loaders anew), when what it trained is the head of the
// same DistributedSampler order: the number of samples it trained, else nothing.
std::optional<std::size_t> trainedBeforeInterruption(const RankPass& resumed, OrderCache& cache) {
  const RankTrace& t = *resumed.trace;
  const LoaderRecord& l = t.loaders.at(resumed.pass->loader);
  const auto full = distributedOrderBehind(t, *resumed.pass, cache);
  if (!full) return std::nullopt;
  const PassRecord* interrupted = nullptr;
  for (const auto& q : t.passes) {
    if (q.loader == resumed.pass->loader || q.startLine >= resumed.pass->startLine) continue;
    const LoaderRecord& ql = t.loaders.at(q.loader);
    if (ql.datasetLen == l.datasetLen && datasetIdentity(ql) == datasetIdentity(l) &&
        trainsOnBatches(q))
      interrupted = &q;  // the last such pass before it
  }
  if (!interrupted || completePass(*interrupted)) return std::nullopt;
  const auto trained = consumedIndices(t, *interrupted, std::nullopt);
  const auto before = distributedOrderBehind(t, *interrupted, cache);
  if (!trained || trained->empty() || !before || *before != *full ||
      trained->size() >= full->size() ||
      !std::equal(trained->begin(), trained->end(), full->begin()))
    return std::nullopt;
  return trained->size();
}

// The resumed first pass skipped more of each rank's order than the interrupted pass before it
// trained: the samples between were trained in neither. Its coverage finding, recorded.
bool resumedPastTheInterruption(DataFindings& findings, std::int64_t loader,
                                const std::vector<RankPass>& ranks, std::size_t skip,
                                const Violation& coverage) {
  std::optional<std::size_t> trained;
  for (const auto& rp : ranks) {
    const auto m = trainedBeforeInterruption(rp, findings.orders());
    if (!m || (trained && *trained != *m)) return false;
    trained = m;
  }
  if (!trained || *trained >= skip) return false;
  const std::size_t gap = skip - *trained;
  const auto world = ranks.size();
  Violation v = coverage;
  v.epoch = ranks[0].pass->samplerEpoch.value_or(v.epoch);
  v.detail = fmt::format(
      "{}, {}: its first pass resumed an interrupted epoch with the first {} samples of each "
      "rank's DistributedSampler order skipped, but the interrupted pass before it trained only "
      "the first {} of them on each rank: {} samples per rank ({} of {}) were trained in neither "
      "pass",
      describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]), skip, *trained, gap,
      gap * world, ranks[0].pass->datasetLen);
  explain(v, {skip == *trained * world
                  ? fmt::format("the resume skips {} samples of each rank's shard, {} x the {} "
                                "each rank trained before the interruption: the offset counts "
                                "the samples of every rank (steps x batch size x world size), "
                                "and each rank skips it in its own shard",
                                skip, world, *trained)
                  : fmt::format("the resume skips {} samples of each rank's shard, but each rank "
                                "trained {} before the interruption",
                                skip, *trained),
              "skip what the rank itself trained of the epoch (steps done x batch size), in its "
              "own shard"});
  findings.record(loader, v);
  return true;
}

// NOTE [A rank's share sharded again] (docs/audit.md): Lightning (use_distributed_sampler=True)
// wrapped the loader's sampler in its DistributedSamplerWrapper, and that sampler held exactly the
// rank's share (its length times the ranks is the dataset's): split again, each rank trains
// 1 / W of its share. Its coverage finding, recorded.
bool reshardedByLightning(DataFindings& findings, std::int64_t loader, std::int64_t k, std::int64_t n,
                          const std::vector<RankPass>& ranks, const std::set<sampler::Index>& drawn,
                          const Violation& coverage) {
  const RankTrace& t = *ranks[0].trace;
  const SamplerRecord* s = samplerOf(t, loader);
  if (!s || !drivenByLightning(t) ||
      s->className.find("DistributedSamplerWrapper") == std::string::npos || !s->numReplicas ||
      s->datasetLen * *s->numReplicas != n || s->datasetLen <= 0)
    return false;
  const auto world = *s->numReplicas;
  Violation v = coverage;
  v.epoch = k;
  v.detail = fmt::format(
      "{}, {}: the sampler it wraps holds {} samples on each rank, the rank's own share ({} x {} "
      "ranks = the {} samples), and the wrapper split it across the {} ranks again: each rank "
      "trained {} of its {} samples, {} of {} were not trained in this epoch",
      describeLoader(t, loader), samplerName(ranks[0]), s->datasetLen, s->datasetLen, world, n,
      world, ranks[0].order ? ranks[0].order->size() : 0, s->datasetLen,
      n - static_cast<std::int64_t>(drawn.size()), n);
  explain(v, {"Lightning (use_distributed_sampler=True) wrapped the loader's sampler, already each "
              "rank's own share of the data, in its DistributedSamplerWrapper, which shards it by "
              "rank a second time",
              "pass Trainer(use_distributed_sampler=False) when the sampler shards by rank itself, "
              "or give the loader a sampler over the whole dataset and let Lightning shard it"});
  findings.record(loader, v);
  return true;
}

// A pass after the loader's first that skipped the head of every rank's DistributedSampler order:
// the offset of a resumed epoch applied again. Its coverage finding, recorded.
bool resumeOffsetRepeated(DataFindings& findings, std::int64_t loader, std::int64_t k,
                          std::int64_t first, const std::vector<RankPass>& ranks,
                          const Violation& coverage) {
  if (k == first) return false;
  const auto skip = skippedHead(ranks, findings.orders());
  if (!skip) return false;
  Violation v = coverage;
  v.detail = fmt::format("{}, {}: each rank drew DistributedSampler's order for sampler epoch {} "
                         "with its first {} samples skipped ({} of {} on rank {}), as a job "
                         "resuming a mid-epoch checkpoint does; {}",
                         describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]),
                         ranks[0].pass->samplerEpoch.value_or(0), *skip, ranks[0].order->size(),
                         ranks[0].order->size() + *skip, ranks[0].trace->rank, coverage.detail);
  explain(v, {fmt::format("{} still skips the samples of the epoch it resumed in: the offset set "
                          "when the checkpoint was loaded (a start index of {} per rank) is never "
                          "reset, so every later epoch skips its first {} samples on every rank "
                          "and those are never trained in it",
                          samplerClass(ranks[0]), *skip, *skip),
              "reset the offset to 0 once the resumed epoch ends (in set_epoch, or after the "
              "first pass)"});
  findings.record(loader, v);
  return true;
}

}  // namespace

bool subsetSampler(DataFindings& findings, std::int64_t loader, std::int64_t k, std::int64_t n,
                   const std::vector<RankPass>& ranks, const Violation& coverage) {
  const SamplerRecord* s = samplerOf(*ranks[0].trace, loader);
  if (!s || s->order != OrderKind::kRecorded || isWholeDatasetSampler(s)) return false;
  const auto here = drawnIn(ranks);
  if (!here || here->empty() || static_cast<std::int64_t>(here->size()) >= n) return false;
  const std::vector<std::int64_t> epochs = trainingEpochs(*ranks[0].trace, loader);
  bool sameEveryEpoch = epochs.size() > 1, newOrder = false;
  for (auto e : epochs) {
    if (e == k) continue;
    const auto again = passAcrossRanks(findings.trace(), loader, e, findings.orders());
    const auto other = drawnIn(again);
    if (!other || *other != *here) sameEveryEpoch = false;
    newOrder = newOrder || again.empty() || again[0].order != ranks[0].order;
  }
  const auto left = n - static_cast<std::int64_t>(here->size());
  if (resumeOffsetRepeated(findings, loader, k, epochs.front(), ranks, coverage)) return true;
  if (reshardedByLightning(findings, loader, k, n, ranks, *here, coverage)) return true;
  if (!sameEveryEpoch) {
    if (k == epochs.front()) {
      if (const auto skip = skippedHead(ranks, findings.orders())) {
        if (resumedPastTheInterruption(findings, loader, ranks, *skip, coverage)) return true;
        findings.note(fmt::format(
            "{}: its first pass drew DistributedSampler's order with the first {} samples "
            "skipped on every rank: an epoch resumed from a mid-epoch checkpoint, whose skipped "
            "samples were the interrupted run's to train; later passes are judged as full epochs",
            describeLoader(*ranks[0].trace, loader), *skip));
        return true;
      }
      findings.note(fmt::format(
          "{}: {} draws a subset, {} of the {} samples, without overlap between ranks, and a new "
          "one each epoch{}: a sampler that subsamples (it never promised every sample each "
          "epoch), so coverage is not judged per epoch",
          describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]), here->size(), n,
          epochs.size() > 1 ? "" : " (one epoch only: whether it changes is not known)"));
    }
    return true;
  }
  Violation v = coverage;
  v.detail = fmt::format("{}, {}: {} of {} indices are on no rank in any of the {} epochs: the "
                         "ranks drew the same {} samples every epoch",
                         describeLoader(*ranks[0].trace, loader), samplerName(ranks[0]), left, n,
                         epochs.size(), here->size());
  if (!newOrder) {  // the same order too: a split that drops samples, as any epoch's finding
    explain(v, partitionCause(ranks, v.property, v.ranks, findings.trace()));
    findings.record(loader, v);
    return true;
  }
  explain(v, {fmt::format("{} draws the same subset every epoch (in a new order each time): it "
                          "picks its samples before it shuffles (the first k of each class, "
                          "ix[:k], or a subset fixed when it was built), so {} samples are never "
                          "trained in the whole run",
                          samplerClass(ranks[0]), left),
              "shuffle before taking the subset (a new subset each epoch, drawn with seed + "
              "epoch), or take every sample"});
  findings.record(loader, v);
  return true;
}

}  // namespace ddph::audit
