#include "step_mismatch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>

namespace ddph::scenario {

using sampler::Violation;
namespace property = sampler::property;

namespace {

std::string rankList(const std::vector<std::int64_t>& ranks) {
  if (ranks.size() <= 8) return fmt::format("{}", fmt::join(ranks, ", "));
  return fmt::format("{}, … ({} ranks)", fmt::join(ranks.begin(), ranks.begin() + 8, ", "),
                     ranks.size());
}

// "3 steps: ranks 0, 1; 2 steps: ranks 2, 3"
std::string groupRanksByValue(const std::vector<std::int64_t>& perRank, const char* unit) {
  std::map<std::int64_t, std::vector<std::int64_t>, std::greater<>> groups;
  for (std::size_t r = 0; r < perRank.size(); ++r) {
    groups[perRank[r]].push_back(static_cast<std::int64_t>(r));
  }
  std::vector<std::string> parts;
  for (const auto& [value, ranks] : groups) {
    parts.push_back(fmt::format("{} {}: rank{} {}", value, unit, ranks.size() == 1 ? "" : "s",
                                rankList(ranks)));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Step `step` of `epoch`, which the ranks with more than `step` planned steps still run while the
// others ran out: the ranks on each side and every rank's step count.
Violation describeStepMismatch(std::int64_t epoch, std::int64_t step,
                               const std::vector<std::int64_t>& plannedSteps) {
  std::vector<std::int64_t> done, waiting;
  for (std::size_t r = 0; r < plannedSteps.size(); ++r) {
    (step < plannedSteps[r] ? waiting : done).push_back(static_cast<std::int64_t>(r));
  }
  Violation v;
  v.property = std::string(property::kCollectiveMismatch);
  v.ranks = done;
  v.epoch = epoch;
  v.step = step;
  v.detail = fmt::format(
      "rank{} {} ran out of batches after {} steps while rank{} {} still run step {}: a real "
      "job hangs in that step's gradient allreduce (steps per rank: {})",
      done.size() == 1 ? "" : "s", rankList(done), step, waiting.size() == 1 ? "" : "s",
      rankList(waiting), step, groupRanksByValue(plannedSteps, "steps"));
  return v;
}

}  // namespace

int ranksTakingStep(const Scenario& s, int world, std::int64_t epoch, std::int64_t step,
                    std::int64_t stepsBeforeStop) {
  return s.resume && epoch == 0 && step >= stepsBeforeStop ? s.resume->worldSize : world;
}

std::optional<Violation> findStepMismatch(const Scenario& s, std::int64_t epoch,
                                          const std::vector<std::int64_t>& plannedSteps,
                                          std::int64_t stepsBeforeStop) {
  const int world = static_cast<int>(plannedSteps.size());
  for (std::int64_t step = 0;; ++step) {
    const auto participants =
        std::count_if(plannedSteps.begin(), plannedSteps.end(),
                      [step](std::int64_t planned) { return step < planned; });
    if (participants == 0) return std::nullopt;
    if (participants != ranksTakingStep(s, world, epoch, step, stepsBeforeStop)) {
      return describeStepMismatch(epoch, step, plannedSteps);
    }
  }
}

}  // namespace ddph::scenario
