#pragma once
// The reference trainer: DDP as it should be done, in LibTorch.
//
// One call runs a whole training on this rank: joins the world (env:// as torchrun does, or a
// single process), loads the datasets, builds one DistributedSampler per dataset and calls
// set_epoch every epoch, wraps the model in ddph::DistributedDataParallel, trains, evaluates with
// exactly-once sharding, checkpoints and reports. Torch-free header: ddp-train's main and tests
// do not compile torch.

#include <optional>

#include "ddph/comm/rank_env.h"
#include "ddph/train/train_config.h"
#include "ddph/train/training_report.h"

namespace ddph::train {

/// Runs the training. `env` is the torchrun-style rank environment, or nullopt for one process.
/// Returns the report (complete on every rank except for rank-0-only fields; only rank 0 writes
/// files). Throws ConfigError for bad input (missing or corrupt data, a checkpoint of another
/// run), TimeoutError or ProtocolError when a peer fails, Error for the rest.
TrainingReport runTraining(const TrainConfig& config, const std::optional<comm::RankEnv>& env);

}  // namespace ddph::train
