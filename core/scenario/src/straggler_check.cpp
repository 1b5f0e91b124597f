#include "straggler_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace ddph {

std::optional<Violation> findStragglers(const std::vector<std::vector<std::int64_t>>& all) {
  const auto world = static_cast<int>(all.size());
  std::vector<std::int64_t> compute, wait;
  for (const auto& r : all) {
    compute.push_back(r.at(0));
    wait.push_back(r.at(1));
  }
  const auto median = [](std::vector<std::int64_t> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return static_cast<double>(v[v.size() / 2]);
  };
  const double medianCompute = median(compute);
  const double medianStep = medianCompute + median(wait);
  // A straggler computes over 3x the median, at least 5 ms more, and the excess is a real part
  // (over a quarter) of the median step: scheduling noise on a loaded machine, or a rank that
  // is a little slower while everyone waits seconds in collectives, is not a straggler.
  std::vector<std::int64_t> slow;
  for (int r = 0; r < world; ++r) {
    const double t = static_cast<double>(compute[static_cast<std::size_t>(r)]);
    const double excess = t - medianCompute;
    if (t > 3 * medianCompute && excess > 5000 && excess > 0.25 * medianStep) slow.push_back(r);
  }
  if (slow.empty()) return std::nullopt;
  const auto worst = slow.front();
  Violation v;
  v.property = std::string(property::kStraggler);
  v.ranks = slow;
  v.detail = fmt::format(
      "rank {} computes {:.1f} ms per step where the median rank computes {:.2f} ms; the others "
      "wait for it in every allreduce (rank 0 waits {:.1f} ms per step)",
      worst, compute[static_cast<std::size_t>(worst)] / 1000.0, medianCompute / 1000.0,
      all[0].at(1) / 1000.0);
  return v;
}

}  // namespace ddph
