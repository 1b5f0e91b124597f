#include "straggler_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ddph/audit/step_times.h"

namespace ddph::scenario {

using verify::Violation;
namespace property = verify::property;

namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The rank's median compute before a collective, in ms: from its first batch, or the previous
// collective's completion, to entering the next. A straggler is slow in most steps, not in the one
// the scheduler held it back in (2048 ranks on 2 cores: tens of ms, once), which a mean over a few
// steps cannot tell apart. Nothing when no collective after the first batch has its times.
std::optional<double> medianComputeBeforeCollectives(const audit::RankTrace& t) {
  std::optional<std::pair<std::int64_t, double>> firstBatch;  // (line, t)
  for (const auto& pass : t.passes) {
    for (const auto& b : pass.batches) {
      if (b.t && (!firstBatch || b.line < firstBatch->first)) firstBatch = {{b.line, *b.t}};
    }
  }
  if (!firstBatch) return std::nullopt;
  std::vector<const audit::CollectiveRecord*> collectives;
  for (const auto& [group, list] : t.collectives) {
    for (const auto& c : list) {
      if (c.line > firstBatch->first && c.t) collectives.push_back(&c);
    }
  }
  std::sort(collectives.begin(), collectives.end(),
            [](const auto* a, const auto* b) { return a->line < b->line; });
  std::vector<double> computeMs;
  double from = firstBatch->second;
  for (const auto* c : collectives) {
    computeMs.push_back(std::max(0.0, *c->t - from) * 1000.0);
    from = c->doneT.value_or(*c->t);
  }
  if (computeMs.empty()) return std::nullopt;
  return median(std::move(computeMs));
}

}  // namespace

std::optional<Violation> findStragglers(const audit::Trace& trace) {
  std::vector<double> compute, wait, typical;
  for (const auto& rank : trace.ranks) {
    const auto times = rank ? audit::stepTimesOf(*rank) : std::nullopt;
    const auto perStep = rank ? medianComputeBeforeCollectives(*rank) : std::nullopt;
    if (!times || !perStep) return std::nullopt;
    compute.push_back(times->computeMs);
    wait.push_back(times->waitMs);
    typical.push_back(*perStep);
  }
  if (compute.empty()) return std::nullopt;
  const double medianCompute = median(compute);
  const double medianTypical = median(typical);
  const double medianStep = medianCompute + median(wait);
  // Scheduling noise on a loaded machine, or a rank that is a little slower while everyone waits
  // seconds in collectives, is not a straggler.
  std::vector<std::int64_t> slow;
  for (std::size_t r = 0; r < compute.size(); ++r) {
    const double excess = compute[r] - medianCompute;
    const bool slowInMostSteps = typical[r] > 3 * medianTypical && typical[r] - medianTypical > 5.0;
    if (slowInMostSteps && compute[r] > 3 * medianCompute && excess > 5.0 &&
        excess > 0.25 * medianStep) {
      slow.push_back(static_cast<std::int64_t>(r));
    }
  }
  if (slow.empty()) return std::nullopt;
  const auto worst = static_cast<std::size_t>(slow.front());
  Violation v;
  v.property = std::string(property::kStraggler);
  v.ranks = slow;
  v.detail = fmt::format(
      "rank {} computes {:.1f} ms per step where the median rank computes {:.2f} ms; the others "
      "wait for it in every allreduce (rank 0 waits {:.1f} ms per step)",
      worst, compute[worst], medianCompute, wait[0]);
  return v;
}

}  // namespace ddph::scenario
