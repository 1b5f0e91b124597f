#pragma once
// Where a ddp-train run stands, as far as checkpoints go, in one object: where the run started (a
// checkpoint's position or the beginning), the world size of the run that wrote that checkpoint
// when it differs (NOTE [Elastic resume]), the global step, where a checkpoint written now would
// resume, the last checkpoint written, and the fingerprint every checkpoint of the run records.

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "ddph/train/train_config.h"

namespace ddph::train {

struct ResumeState {
  Fingerprint fingerprint;           ///< what fixes the sample order and the model
  TrainingPosition start;            ///< where this run starts (a checkpoint's, or the beginning)
  std::int64_t elasticFrom = 0;      ///< the checkpoint's world size when it differs from this one
  std::int64_t globalStep = 0;       ///< optimizer steps taken, earlier runs included
  TrainingPosition current;          ///< where a checkpoint written now would resume
  std::int64_t checkpointedAt = -1;  ///< globalStep of this run's last checkpoint
};

/// The state of a run of `worldSize` ranks over training sets of `trainSizes` samples starting at
/// `loaded` (a checkpoint's position, or a default one for a fresh run). A checkpoint of another
/// world size is resumed elastically: the run that wrote it becomes one more earlier run of its
/// epoch, and this world takes the rest of the epoch's order from its first step. Throws
/// ConfigError where that is impossible (--mix cycle, or no consumed samples recorded).
ResumeState startFrom(TrainingPosition loaded, Fingerprint fingerprint, const TrainConfig& config,
                      const std::vector<std::int64_t>& trainSizes, int worldSize);

/// The announcement's "; resumed from PATH at epoch E step S" (or "; resumed elastically …").
std::string resumedFromText(const ResumeState& state, const TrainConfig& config);

}  // namespace ddph::train
