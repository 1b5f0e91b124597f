#pragma once
// What a ddp-train run reports: per-epoch loss, accuracy, throughput and the per-dataset visit
// accounting, and the final parameters as (name, sum, norm) so two runs can be compared without
// reading checkpoints. Rank 0 writes it as JSON, atomically. Torch-free.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddph/data/dataset_mix.h"
#include "ddph/train/train_config.h"

namespace ddph::train {

struct DatasetEval {
  std::string dataset;
  std::int64_t correct = 0;
  std::int64_t total = 0;  ///< the test split's size: every sample counted exactly once
  /// How many duplicates a padded DistributedSampler would have added to `total` (what
  /// exactly-once sharding avoided).
  std::int64_t paddingAvoided = 0;
};

struct DatasetVisits {
  std::string dataset;
  data::VisitSummary visits;
};

/// One optimizer step this run took (kept with --report-html only: the page's loss and
/// throughput per step).
struct StepRecord {
  std::int64_t step = 0;     ///< global step, 1-based (the optimizer steps taken after it)
  double loss = 0;           ///< the step's loss, mean over ranks
  std::int64_t samples = 0;  ///< training samples of the step, all ranks
  double seconds = 0;        ///< rank 0's wall time from the previous step's end to this one's
};

struct EpochRecord {
  std::int64_t epoch = 0;
  std::int64_t firstStep = 0;  ///< > 0 when the epoch was resumed from a checkpoint
  std::int64_t steps = 0;      ///< steps in this epoch (all of them, resumed ones included)
  std::int64_t plannedSteps = 0;  ///< the epoch's steps had it run to its end (--steps, a signal)
  double loss = 0;             ///< mean of the step losses, over ranks and steps
  std::int64_t samples = 0;    ///< training samples served this run, all ranks
  double seconds = 0;          ///< training time of this epoch in this run (no evaluation)
  double samplesPerSecond = 0;
  std::optional<double> evalAccuracy;  ///< over all evaluated datasets together
  std::vector<DatasetEval> eval;
  std::vector<DatasetVisits> datasets;
  std::vector<StepRecord> stepLog;  ///< the steps this run took, with --report-html only
};

struct ParameterSummary {
  std::string name;
  double sum = 0;
  double norm = 0;
};

struct TrainingReport {
  int worldSize = 1;
  std::string backend;
  TrainConfig config;
  std::vector<EpochRecord> epochs;
  std::int64_t globalSteps = 0;
  double trainSeconds = 0;
  std::int64_t trainSamples = 0;
  std::vector<ParameterSummary> parameters;
  /// Non-zero when SIGINT/SIGTERM stopped the run (the checkpoint was written first).
  int stoppedBySignal = 0;

  double samplesPerSecond() const {
    return trainSeconds > 0 ? static_cast<double>(trainSamples) / trainSeconds : 0.0;
  }
};

/// The JSON document (see README, "ddp-train --report-json").
std::string toJson(const TrainingReport& report);

/// Writes toJson(report) to `path` atomically (temp file + rename); throws Error naming the path.
void writeReport(const TrainingReport& report, const std::string& path);

/// The epoch's one-line summary printed by rank 0, e.g.
/// "epoch 1/2: loss 0.4123, eval accuracy 91.20% (mnist 9120/10000), 14210 samples/s;
///  mnist: 60000 seen, 0 never seen, 0 seen twice+".
std::string epochSummaryLine(const EpochRecord& record, std::int64_t epochs);

}  // namespace ddph::train
