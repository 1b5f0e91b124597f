#pragma once
// What one ddp-train run is asked to do: the command line, parsed. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/data/dataset_mix.h"

namespace ddph::train {

enum class OptimizerKind { kSgd, kAdam };
enum class Backend { kAuto, kGloo, kNccl };
enum class ProgressMode { kAuto, kBar, kLines, kNone };
enum class DType { kFloat32, kFloat64 };

struct TrainConfig {
  /// One or two of "mnist", "cifar10", "synthetic"; each gets its own DistributedSampler.
  std::vector<std::string> datasets{"mnist"};
  data::Mix mix = data::Mix::kZip;
  std::string mnistDir = "data/mnist";
  std::string cifar10Dir = "data/cifar-10-batches-bin";
  /// Size of the synthetic training split (its test split has max(1, size / 5) samples).
  std::int64_t datasetSize = 10000;

  std::int64_t epochs = 1;
  /// Stop after this many optimizer steps in all, counted from the start of training (a resumed
  /// run counts the steps before its checkpoint); 0: no limit.
  std::int64_t steps = 0;
  /// Per rank, per dataset (the global batch is batchSize * world size).
  std::int64_t batchSize = 64;
  double lr = 0.01;
  double momentum = 0.0;  ///< SGD only
  OptimizerKind optimizer = OptimizerKind::kSgd;
  /// Seeds the model's initial parameters and every DistributedSampler (seed + epoch).
  std::int64_t seed = 0;
  std::int64_t hidden = 128;
  bool shuffle = true;
  bool eval = true;
  DType dtype = DType::kFloat32;

  /// Written atomically by rank 0 every `checkpointEvery` steps (0: only at the end).
  std::string checkpointPath;
  std::int64_t checkpointEvery = 0;
  std::string resumePath;
  std::string reportJsonPath;
  /// Rank 0 writes the run's HTML page here at the end (docs/html-report.md), atomically.
  std::string reportHtmlPath;
  /// A folder: every rank writes its audit trace (docs/trace-format.md) to `rank-<r>.jsonl` there,
  /// line by line, each batch with its indices: what resume tests compare sample by sample, and
  /// what `ddp-sim audit` checks.
  std::string traceSamplesPath;

  Backend backend = Backend::kAuto;
  /// Torch intra-op threads per rank; 0: the machine's cores divided among the local ranks.
  int threads = 0;
  ProgressMode progress = ProgressMode::kAuto;
  /// Deadline of joining the world and of every collective, in seconds.
  double timeoutSeconds = 300;
  /// The Gloo engine and wait mode (ddp-train takes them from DDPH_GLOO_ENGINE and DDPH_GLOO_WAIT;
  /// the timeout and address are the trainer's).
  comm::GlooOptions gloo;
};

OptimizerKind parseOptimizer(const std::string& name);
Backend parseBackend(const std::string& name);
ProgressMode parseProgressMode(const std::string& name);
DType parseDType(const std::string& name);
std::string optimizerName(OptimizerKind kind);
std::string backendName(Backend backend);
std::string dtypeName(DType dtype);

/// Throws ConfigError naming the first option that is out of range or inconsistent.
void validate(const TrainConfig& config);

}  // namespace ddph::train
