#include "resume_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddph/common/error.h"
#include "ddph/sampler/elastic_sampler.h"

namespace ddph::train {

using sampler::elasticRunStart;

namespace {

// A checkpoint of another world size: the run that wrote it becomes one more earlier run of its
// epoch, and this world takes the rest of the epoch's order from its first step.
void resumeElastically(TrainingPosition& position, const TrainConfig& config,
                       const std::vector<std::int64_t>& trainSizes, int worldSize) {
  if (position.stepInEpoch == 0) return;  // at an epoch boundary nothing is half done
  DDPH_CHECK(config.mix != data::Mix::kCycle || trainSizes.size() == 1,
             "{}: resuming on {} ranks a checkpoint of {}: --mix cycle re-reads the shorter "
             "dataset, so what was consumed is no position in its order; resume on {} ranks, or "
             "train with --mix zip or concat",
             config.resumePath, worldSize, position.worldSize, position.worldSize);
  DDPH_CHECK(position.consumed.size() == trainSizes.size(),
             "{}: the checkpoint records no consumed samples per dataset; resume it on {} ranks",
             config.resumePath, position.worldSize);
  position.history.resize(trainSizes.size());
  if (position.epochLossTerms == 0) position.epochLossTerms = position.stepInEpoch * position.worldSize;
  for (std::size_t d = 0; d < trainSizes.size(); ++d) {
    position.history[d].push_back({position.worldSize, position.consumed[d]});
    elasticRunStart(trainSizes[d], position.history[d], /*dropLast=*/false);
  }
  position.stepInEpoch = 0;
  position.consumed.assign(trainSizes.size(), 0);
}

}  // namespace

ResumeState startFrom(TrainingPosition loaded, Fingerprint fingerprint, const TrainConfig& config,
                      const std::vector<std::int64_t>& trainSizes, int worldSize) {
  ResumeState state;
  state.fingerprint = std::move(fingerprint);
  state.start = std::move(loaded);
  if (state.start.worldSize != 0 && state.start.worldSize != worldSize) {
    state.elasticFrom = state.start.worldSize;
    resumeElastically(state.start, config, trainSizes, worldSize);
  }
  state.start.worldSize = worldSize;
  state.start.history.resize(trainSizes.size());
  state.globalStep = state.start.globalStep;
  state.current = state.start;
  return state;
}

std::string resumedFromText(const ResumeState& state, const TrainConfig& config) {
  const TrainingPosition& start = state.start;
  if (state.elasticFrom == 0) {
    return fmt::format("; resumed from {} at epoch {} step {}", config.resumePath, start.epoch + 1,
                       start.stepInEpoch);
  }
  std::vector<std::string> taken;
  for (std::size_t d = 0; d < config.datasets.size(); ++d) {
    if (!start.history[d].empty()) {
      taken.push_back(fmt::format("{} {} a rank", config.datasets[d], start.history[d].back().consumed));
    }
  }
  return fmt::format("; resumed elastically from {} ({} ranks) at epoch {}{}", config.resumePath,
                     state.elasticFrom, start.epoch + 1,
                     taken.empty() ? std::string(" start")
                                   : fmt::format(" after {}", fmt::join(taken, ", ")));
}

}  // namespace ddph::train
