// ddp-train: the reference DDP trainer. One process per rank, started by `ddp-sim launch` (CPU,
// Gloo) or torchrun (GPUs, NCCL); a single process when no rank variables are set.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "ddph/comm/rank_env.h"
#include "ddph/common/command_line.h"
#include "ddph/common/error.h"
#include "ddph/train/trainer.h"
#include "train_options.h"

namespace {

/// torchrun's variables are there: this process is one rank of a world.
bool launchedAsRank() {
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using ddph::train::TrainConfig;
  CLI::App app{"ddp-train: the reference data-parallel trainer (DDP in LibTorch; Gloo on CPU, "
               "NCCL on GPUs). Run it under `ddp-sim launch -n W --` or torchrun, or alone.",
               "ddp-train"};
  ddph::train::TrainOptions options;
  ddph::train::addTrainOptions(app, options);

  if (const auto exitCode = ddph::common::parseCommandLine(app, argc, argv, "ddp-train"))
    return *exitCode;

  std::string prefix = "ddp-train";
  try {
    TrainConfig config = ddph::train::resolveTrainOptions(options);
    config.gloo = ddph::comm::glooOptionsFromEnvironment();
    std::optional<ddph::comm::RankEnv> env;
    if (launchedAsRank()) {
      env = ddph::comm::rankEnvFromEnvironment();
      prefix = fmt::format("ddp-train: rank {}", env->rank);
    }
    const auto report = ddph::train::runTraining(config, env);
    // Stopped by SIGINT/SIGTERM after checkpointing: the shell's convention for a signal.
    return report.stoppedBySignal != 0 ? 128 + report.stoppedBySignal : ddph::common::kExitOk;
  } catch (const ddph::common::ConfigError& e) {
    fmt::print(stderr, "{}: error: {}\n", prefix, e.what());
    return ddph::common::kExitUsage;
  } catch (const ddph::common::TimeoutError& e) {
    fmt::print(stderr, "{}: error: {}\n", prefix, e.what());
    return ddph::common::kExitViolation;
  } catch (const ddph::common::ProtocolError& e) {
    fmt::print(stderr, "{}: error: {}\n", prefix, e.what());
    return ddph::common::kExitViolation;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: internal error: {}\n", prefix, e.what());
    return ddph::common::kExitRuntime;
  }
}
