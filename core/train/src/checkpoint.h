#pragma once
// ddp-train checkpoints: model, optimizer and the position in training, in one file written
// atomically by rank 0, so that `--resume` continues exactly where the run stopped, neither
// repeating nor skipping a sample. On the same world size: the same epoch, the next step of that
// epoch's plan (a pure function of the seed, the epoch, the world and the epoch's earlier runs).
// On another world size: elastically (NOTE [Elastic resume]): what each rank consumed of every
// dataset in this epoch is recorded, and the new world takes the rest of the epoch's order.
//
// A checkpoint records a fingerprint of what fixes the sample order and the model (datasets and
// their sizes, batch size, mix, seed, shuffle, optimizer, hidden size, dtype); resuming with a
// different one is a ConfigError naming the first field that differs.

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::train {

struct TrainingPosition {
  std::int64_t epoch = 0;
  std::int64_t stepInEpoch = 0;  ///< steps of `epoch` already taken
  std::int64_t globalStep = 0;
  /// Sum over ranks and over the epoch's steps so far of the step losses (the epoch's mean loss
  /// survives a resume).
  double epochLossSum = 0;
  /// How many step losses (one a rank a step) epochLossSum holds; 0: stepInEpoch x worldSize.
  std::int64_t epochLossTerms = 0;
  /// The world size of the run that wrote the checkpoint (0: unknown, a checkpoint before it
  /// was recorded; then the fingerprint's).
  std::int64_t worldSize = 0;
  /// Per dataset: samples each rank consumed in `epoch` in this run (its first stepInEpoch steps).
  std::vector<std::int64_t> consumed;
  /// Per dataset: the runs of `epoch` before this one, on other world sizes, oldest first.
  std::vector<std::vector<sampler::ResumePoint>> history;
};

using Fingerprint = std::map<std::string, std::string>;

/// Writes `path` atomically (temp file in the same folder + rename). Throws Error naming the path.
void saveCheckpoint(const std::string& path, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const TrainingPosition& position,
                    const Fingerprint& fingerprint);

/// Loads into `model` and `optimizer` (built as for a fresh run) and returns the position.
/// Throws ConfigError naming the path when it is missing, not a ddp-train checkpoint, or from a
/// run whose fingerprint differs.
TrainingPosition loadCheckpoint(const std::string& path, torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer, const Fingerprint& expected);

}  // namespace ddph::train
