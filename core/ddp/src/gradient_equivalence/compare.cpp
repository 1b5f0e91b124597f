#include "gradient_equivalence/compare.h"

#include <algorithm>
#include <limits>

namespace ddph::ddp::equivalence {

Deviation deviation(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() && !b.defined()) return {};
  const double inf = std::numeric_limits<double>::infinity();
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) return {inf, 0.0};
  const auto da = a.to(at::kDouble);
  const auto db = b.to(at::kDouble);
  return {(da - db).abs().max().item<double>(), db.abs().max().item<double>()};
}

std::pair<Deviation, std::size_t> worst(const std::vector<at::Tensor>& a,
                                        const std::vector<at::Tensor>& b, const Tolerance& t) {
  Deviation w;
  std::size_t at = 0;
  double worstExcess = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const Deviation d = deviation(a[i], b[i]);
    const double excess = d.absolute - (t.relative * d.scale + t.absolute);
    if (excess > worstExcess) {
      worstExcess = excess;
      w = d;
      at = i;
    }
  }
  return {w, at};
}

namespace {

// True when `ddp` is `reference` scaled by `factor` (to 1e-6 relative), for every tensor.
bool scaledCopy(const std::vector<at::Tensor>& ddp, const std::vector<at::Tensor>& reference,
                double factor) {
  for (std::size_t i = 0; i < ddp.size() && i < reference.size(); ++i) {
    if (!ddp[i].defined() || !reference[i].defined()) return false;
    const auto scaled = reference[i].to(at::kDouble) * factor;
    const Deviation d = deviation(ddp[i], scaled);
    if (d.absolute > 1e-6 * d.scale + 1e-12) return false;
  }
  return true;
}

// Groups the ranks by equal gradients at `step` and lists the parameters they disagree on
// (NOTE [DDP mutants]: a bucket never reduced, buckets paired in another order).
void compareRanks(const std::vector<Run>& ranks, int step, const Tolerance& tolerance,
                  StepComparison& c) {
  const auto grads = [&](int r) -> const std::vector<at::Tensor>& {
    return ranks[static_cast<std::size_t>(r)].grads[static_cast<std::size_t>(step)];
  };
  const auto same = [&](const at::Tensor& a, const at::Tensor& b) {
    return !deviation(a, b).exceeds(tolerance);
  };
  const int W = static_cast<int>(ranks.size());
  for (std::size_t k = 0; k < grads(0).size(); ++k) {
    for (int r = 1; r < W; ++r) {
      if (!same(grads(r)[k], grads(0)[k])) {
        c.splitParams.push_back(k);
        break;
      }
    }
  }
  for (int r = 0; r < W; ++r) {
    auto home = std::find_if(c.classes.begin(), c.classes.end(), [&](const std::vector<int>& cls) {
      return std::all_of(c.splitParams.begin(), c.splitParams.end(), [&](std::size_t k) {
        return same(grads(r)[k], grads(cls.front())[k]);
      });
    });
    if (home == c.classes.end()) {
      c.classes.push_back({r});
    } else {
      home->push_back(r);
    }
  }
}

}  // namespace

StepComparison compareStep(const std::vector<Run>& ranks, const std::vector<at::Tensor>& ref,
                           int step, const Tolerance& tolerance, EquivalenceReport& report) {
  const int W = static_cast<int>(ranks.size());
  StepComparison c;
  c.allScaled = c.allTimesW = W > 1;
  for (int r = 0; r < W; ++r) {
    const Run& run = ranks[static_cast<std::size_t>(r)];
    if (static_cast<std::size_t>(step) >= run.grads.size() ||
        run.grads[static_cast<std::size_t>(step)].empty()) {
      c.sizes.push_back(0);
      c.allScaled = c.allTimesW = false;
      continue;
    }
    c.sizes.push_back(run.batchSizes[static_cast<std::size_t>(step)]);
    const auto& got = run.grads[static_cast<std::size_t>(step)];
    const auto [d, index] = worst(got, ref, tolerance);
    report.maxGradientError = std::max(report.maxGradientError, d.relative());
    if (d.exceeds(tolerance)) {
      c.deviating.push_back(r);
      if (c.worstRank < 0 || d.relative() > c.worst.relative()) {
        c.worst = d;
        c.worstParam = index;
        c.worstRank = r;
      }
    }
    c.allScaled = c.allScaled && scaledCopy(got, ref, 1.0 / W);
    c.allTimesW = c.allTimesW && scaledCopy(got, ref, static_cast<double>(W));
  }
  // Only a step that deviates needs a diagnosis (checkGradients skips the others).
  if (!c.deviating.empty() && std::find(c.sizes.begin(), c.sizes.end(), 0) == c.sizes.end()) {
    compareRanks(ranks, step, tolerance, c);
  }
  return c;
}

}  // namespace ddph::ddp::equivalence
