#include "ddph/audit/step_times.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace ddph::audit {

std::optional<StepTimes> stepTimesOf(const RankTrace& rank) {
  std::optional<double> first;
  double last = 0;
  std::int64_t steps = 0;
  for (const auto& pass : rank.passes) {
    for (const auto& b : pass.batches) {
      if (!b.t) return std::nullopt;
      first = std::min(first.value_or(*b.t), *b.t);
      last = std::max(last, *b.t);
      ++steps;
    }
  }
  if (!first) return std::nullopt;
  std::vector<std::pair<double, double>> inside;  // [entered, left) of each collective in the span
  for (const auto& [group, list] : rank.collectives) {
    for (const auto& c : list) {
      if (!c.t) return std::nullopt;
      if (*c.t < *first) continue;
      if (c.done && !c.doneT) return std::nullopt;
      const double left = std::max(*c.t, c.doneT.value_or(rank.lastT.value_or(*c.t)));
      inside.emplace_back(*c.t, left);
      last = std::max(last, left);
    }
  }
  std::sort(inside.begin(), inside.end());
  double wait = 0, coveredTo = *first;
  std::vector<double> before;              // compute before each collective, in ms
  for (const auto& [from, to] : inside) {  // the union of the intervals
    const double start = std::max(from, coveredTo);
    before.push_back(std::max(0.0, from - coveredTo) * 1000.0);
    if (to > start) wait += to - start;
    coveredTo = std::max(coveredTo, to);
  }
  const double compute = std::max(0.0, (last - *first) - wait);
  const auto perStepMs = [steps](double seconds) { return seconds * 1000.0 / static_cast<double>(steps); };
  double medianBefore = 0;
  if (!before.empty()) {
    const auto middle = before.begin() + static_cast<long>(before.size() / 2);
    std::nth_element(before.begin(), middle, before.end());
    medianBefore = *middle;
  }
  return StepTimes{perStepMs(compute), perStepMs(wait), medianBefore};
}

}  // namespace ddph::audit
