// NOTE [A sampler that draws a subset] (docs/audit.md): a sampler of the program's own whose ranks
// split, without overlap, fewer samples than the dataset holds (an undersampler that balances the
// classes, a curriculum) never promised every sample each epoch. Its coverage is judged over the
// run: a new subset each epoch is its design (a note); the very same subset in every epoch leaves
// the same samples out of the whole run (coverage), which the cause says.
#include <fmt/format.h>

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
  if (!sameEveryEpoch) {
    if (k == epochs.front()) {
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
