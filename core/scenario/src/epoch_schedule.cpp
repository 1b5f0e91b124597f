#include "epoch_schedule.h"

#include <algorithm>
#include <random>

namespace ddph::scenario {

Schedule epochSchedule(const Scenario& s, const std::vector<std::size_t>& counts,
                       std::int64_t epoch) {
  Schedule schedule;
  const std::size_t shortest = *std::min_element(counts.begin(), counts.end());
  const std::size_t longest = *std::max_element(counts.begin(), counts.end());
  switch (s.combine) {
    case Combine::kZip:
    case Combine::kConcat:
      for (std::size_t k = 0; k < shortest; ++k) {
        schedule.emplace_back();
        for (std::size_t d = 0; d < counts.size(); ++d) schedule.back().push_back({d, k});
      }
      break;
    case Combine::kCycle:
      for (std::size_t k = 0; k < longest; ++k) {
        schedule.emplace_back();
        for (std::size_t d = 0; d < counts.size(); ++d) {
          if (counts[d] > 0) schedule.back().push_back({d, k % counts[d]});
        }
      }
      break;
    case Combine::kWeighted: {
      // The same generator on every rank (seed, epoch): ranks agree on which dataset each step
      // draws from, as a seeded weighted sampler would.
      std::mt19937_64 gen(static_cast<std::uint64_t>(s.seed) * 1000003ULL +
                          static_cast<std::uint64_t>(epoch));
      std::vector<std::size_t> next(counts.size(), 0);
      while (true) {
        std::vector<double> weights;
        double total = 0;
        for (std::size_t d = 0; d < counts.size(); ++d) {
          weights.push_back(next[d] < counts[d] ? s.weights[d] : 0.0);
          total += weights.back();
        }
        if (total <= 0) break;
        std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
        const std::size_t d = pick(gen);
        schedule.push_back({{d, next[d]++}});
      }
      break;
    }
  }
  return schedule;
}

}  // namespace ddph::scenario
