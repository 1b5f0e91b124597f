// What a rank's whole trace decides about its passes, once every line is read: which passes
// ended (NOTE [Passes and epochs], docs/audit.md), and which were peeks rather than epochs.
#include "passes_and_epochs.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ddph::trace {

namespace {

// A pass that handed out len(loader) batches is complete however the loop left it: Lightning
// and `for _ in range(len(loader)): next(it)` stop there and never see StopIteration. It ends
// after its last batch (a set_epoch after that is for the next pass, not too late for this one).
void completeAtItsLength(PassRecord& p) {
  if (p.ended || !p.declaredBatches || *p.declaredBatches <= 0) return;
  if (static_cast<std::int64_t>(p.batches.size()) < *p.declaredBatches) return;
  p.ended = true;
  p.leftAtItsLength = true;
  if (p.endLine == 0) p.endLine = p.batches.back().line + 1;
}

// zip(a, b) takes a's batch before b raises StopIteration: a's last batch, handed out on the
// line before another loader's pass ended, was thrown away, however many a handed out.
bool lastBatchThrownAway(const RankTrace& t, const PassRecord& p) {
  if (p.ended || p.batches.empty()) return false;
  const std::int64_t after = p.batches.back().line + 1;
  return std::any_of(t.passes.begin(), t.passes.end(), [&](const PassRecord& q) {
    return q.loader != p.loader && q.ended && q.endLine == after;
  });
}

// An evaluation pass (every batch handed out without gradients) cut before its end, after which
// the same loader was iterated again: a sanity check (Lightning's two validation batches before
// training) or a preview, not an epoch.
bool isCutEvaluation(const PassRecord& p) {
  return !p.ended && !p.batches.empty() &&
         std::none_of(p.batches.begin(), p.batches.end(), [](const BatchRecord& b) { return b.grad; });
}

// NOTE [Passes and epochs] (docs/audit.md): a pass that did not run to its end, after whose
// batches no DDP forward ran before the same loader's next pass began, fed no training step
// (`next(iter(loader))` to print the batch size): it is a peek, not an epoch; so is an
// evaluation cut short before the same loader's next pass (a sanity check). Peeks leave the
// passes; the loader's later passes are renumbered, and so are the collectives that name them.
// A trace without DDP forwards cannot tell a training peek from a pass: only cut evaluations
// are set aside there.
void setPeeksAside(RankTrace& t, const std::vector<std::int64_t>& forwardLines) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> renumbered;  // old -> new iter
  std::map<std::int64_t, std::int64_t> nextIter;  // loader -> the next epoch's number
  // The start line of each pass's next pass of the same loader (0: none), in one sweep back.
  std::vector<std::int64_t> nextStart(t.passes.size(), 0);
  std::map<std::int64_t, std::int64_t> laterStart;  // loader -> start of its next pass
  for (std::size_t i = t.passes.size(); i-- > 0;) {
    std::int64_t& later = laterStart[t.passes[i].loader];
    nextStart[i] = later;
    later = t.passes[i].startLine;
  }
  std::vector<PassRecord> kept;
  for (std::size_t i = 0; i < t.passes.size(); ++i) {
    PassRecord& p = t.passes[i];
    const auto from = p.batches.empty() ? p.startLine : p.batches.front().line;
    const bool fedAStep =
        forwardLines.empty() ||
        std::lower_bound(forwardLines.begin(), forwardLines.end(), from) !=
            std::lower_bound(forwardLines.begin(), forwardLines.end(), nextStart[i]);
    if (!p.ended && nextStart[i] != 0 && (!fedAStep || isCutEvaluation(p))) {
      ++t.loaders[p.loader].peeks;
      renumbered[{p.loader, p.iter}] = nextIter[p.loader];  // its batches: before that epoch
      continue;
    }
    renumbered[{p.loader, p.iter}] = nextIter[p.loader];
    p.iter = nextIter[p.loader]++;
    kept.push_back(std::move(p));
  }
  const bool none = kept.size() == t.passes.size();
  t.passes = std::move(kept);
  if (none) return;
  t.passIndex.clear();
  for (std::size_t i = 0; i < t.passes.size(); ++i) {
    t.passIndex[{t.passes[i].loader, t.passes[i].iter}] = i;
  }
  for (auto& [group, list] : t.collectives) {
    for (auto& c : list) {
      const auto it = renumbered.find({c.loader, c.iter});
      if (it == renumbered.end()) continue;
      const PassRecord* p = t.findPass(c.loader, it->second);
      if (!p || p->startLine > c.line) c.batchSeq = -1;  // after a peek: before the epoch
      c.iter = it->second;
    }
  }
}

// NOTE [A sampler over another sampler's draws] (docs/trace-format.md): a sampler whose own
// dataset is another sampler's list of draws (catalyst's and Lightning's DistributedSamplerWrapper)
// yields indices of the loader's dataset, past its own length: the pass indexes the loader's.
void indexTheLoadersDataset(RankTrace& t, PassRecord& p) {
  const auto l = t.loaders.find(p.loader);
  if (l == t.loaders.end() || l->second.datasetLen <= p.datasetLen) return;
  sampler::Index most = -1;
  for (const auto& b : p.batches) {
    if (b.indices && !b.indices->empty()) {
      most = std::max(most, *std::max_element(b.indices->begin(), b.indices->end()));
    }
  }
  if (most >= p.datasetLen && most < l->second.datasetLen) p.datasetLen = l->second.datasetLen;
}

}  // namespace

void settlePasses(RankTrace& t, const std::vector<std::int64_t>& forwardLines, std::int64_t lastLine) {
  for (auto& p : t.passes) {
    if (!lastBatchThrownAway(t, p)) completeAtItsLength(p);
  }
  for (auto& p : t.passes) {
    if (p.endLine == 0) p.endLine = lastLine + 1;
    indexTheLoadersDataset(t, p);
  }
  setPeeksAside(t, forwardLines);
}

}  // namespace ddph::trace
