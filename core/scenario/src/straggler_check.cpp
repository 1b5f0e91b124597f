#include "straggler_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ddph/audit/step_times.h"

namespace ddph::scenario {

using sampler::Violation;
namespace property = sampler::property;

namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::optional<Violation> findStragglers(const trace::Trace& trace) {
  std::vector<double> compute, wait, typical;
  for (const auto& rank : trace.ranks) {
    const auto times = rank ? audit::stepTimesOf(*rank) : std::nullopt;
    if (!times) return std::nullopt;
    compute.push_back(times->computeMs);
    wait.push_back(times->waitMs);
    typical.push_back(times->medianComputeMs);  // slow in most steps, not held back in one
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
