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
#include "ddph/config.h"
#include "ddph/train/trainer.h"

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
  app.set_version_flag("--version", std::string("ddp-train ") + DDPH_VERSION + " (LibTorch " +
                                        DDPH_TORCH_VERSION + ")");
  app.footer(
      "Exit codes: 0 trained, 1 a peer failed or a collective ran past --timeout, 2 bad "
      "arguments, data or checkpoint, 3 internal or I/O error, 128+N stopped by signal N after "
      "writing the checkpoint (with --checkpoint).");
  TrainConfig config;
  std::string mix = "zip", optimizer = "sgd", backend = "auto", progress = "auto",
              dtype = "float32";
  bool noShuffle = false, noEval = false;

  // A repeated option takes its last value (so a script's defaults can be overridden by appending).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--dataset", config.datasets,
                 "mnist|cifar10|synthetic; two (comma-separated or repeated) train at once")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->capture_default_str();
  app.add_option("--mix", mix, "how two datasets are combined: zip|cycle|concat")
      ->capture_default_str();
  app.add_option("--mnist-dir", config.mnistDir, "folder with the four MNIST IDX files")
      ->capture_default_str();
  app.add_option("--cifar10-dir", config.cifar10Dir,
                 "folder with CIFAR-10's data_batch_*.bin and test_batch.bin")
      ->capture_default_str();
  app.add_option("--dataset-size", config.datasetSize, "samples in the synthetic training set")
      ->capture_default_str();
  app.add_option("--epochs", config.epochs, "epochs")->capture_default_str();
  app.add_option("--steps", config.steps,
                 "stop after this many optimizer steps in all (0: no limit)")
      ->capture_default_str();
  app.add_option("--batch-size", config.batchSize, "samples per rank per dataset in a step")
      ->capture_default_str();
  app.add_option("--lr", config.lr, "learning rate")->capture_default_str();
  app.add_option("--momentum", config.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--optimizer", optimizer, "sgd|adam")->capture_default_str();
  app.add_option("--seed", config.seed, "model initialisation and sampler seed")
      ->capture_default_str();
  app.add_option("--hidden", config.hidden, "hidden units of the MLP")->capture_default_str();
  app.add_flag("--no-shuffle", noShuffle, "DistributedSampler(shuffle=False)");
  app.add_flag("--no-eval", noEval, "skip the evaluation after each epoch");
  app.add_option("--dtype", dtype, "float32|float64")->capture_default_str();
  app.add_option("--checkpoint", config.checkpointPath,
                 "checkpoint file rank 0 writes (atomically) every K steps and at the end");
  app.add_option("--checkpoint-every", config.checkpointEvery, "K (0: only at the end)")
      ->capture_default_str();
  app.add_option("--resume", config.resumePath, "continue from this checkpoint");
  app.add_option("--report-json", config.reportJsonPath,
                 "write per-epoch figures and the final parameters here (rank 0)");
  app.add_option("--trace-samples", config.traceSamplesPath,
                 "every rank writes its audit trace (docs/trace-format.md), each batch with its "
                 "indices, to DIR/rank-<r>.jsonl; `ddp-sim audit DIR` checks it");
  app.add_option("--backend", backend, "auto|gloo|nccl (auto: nccl when a GPU is usable)")
      ->capture_default_str();
  app.add_option("--threads", config.threads,
                 "torch threads per rank (0: the cores divided among local ranks)")
      ->capture_default_str();
  app.add_option("--progress", progress,
                 "auto|bar|lines|none (auto: a bar on a terminal, lines otherwise)")
      ->capture_default_str();
  app.add_option("--timeout", config.timeoutSeconds,
                 "seconds: deadline of joining the world and of every collective")
      ->capture_default_str();

  if (const auto exitCode = ddph::parseCommandLine(app, argc, argv, "ddp-train")) return *exitCode;

  std::string prefix = "ddp-train";
  try {
    config.mix = ddph::data::parseMix(mix);
    config.optimizer = ddph::train::parseOptimizer(optimizer);
    config.backend = ddph::train::parseBackend(backend);
    config.progress = ddph::train::parseProgressMode(progress);
    config.dtype = ddph::train::parseDType(dtype);
    config.shuffle = !noShuffle;
    config.eval = !noEval;
    config.gloo = ddph::glooOptionsFromEnvironment();
    std::optional<ddph::RankEnv> env;
    if (launchedAsRank()) {
      env = ddph::rankEnvFromEnvironment();
      prefix = fmt::format("ddp-train: rank {}", env->rank);
    }
    const auto report = ddph::train::runTraining(config, env);
    // Stopped by SIGINT/SIGTERM after checkpointing: the shell's convention for a signal.
    return report.stoppedBySignal != 0 ? 128 + report.stoppedBySignal : ddph::kExitOk;
  } catch (const ddph::ConfigError& e) {
    fmt::print(stderr, "{}: error: {}\n", prefix, e.what());
    return ddph::kExitUsage;
  } catch (const ddph::TimeoutError& e) {
    fmt::print(stderr, "{}: error: {}\n", prefix, e.what());
    return ddph::kExitViolation;
  } catch (const ddph::ProtocolError& e) {
    fmt::print(stderr, "{}: error: {}\n", prefix, e.what());
    return ddph::kExitViolation;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: internal error: {}\n", prefix, e.what());
    return ddph::kExitRuntime;
  }
}
