#include "train_options.h"

#include <string>

#include "ddph/config.h"
#include "ddph/data/dataset_mix.h"

namespace ddph::train {

void addTrainOptions(CLI::App& app, TrainOptions& options) {
  app.set_version_flag("--version", std::string("ddp-train ") + DDPH_VERSION + " (LibTorch " +
                                        DDPH_TORCH_VERSION + ")");
  app.footer(
      "Exit codes: 0 trained, 1 a peer failed or a collective ran past --timeout, 2 bad "
      "arguments, data or checkpoint, 3 internal or I/O error, 128+N stopped by signal N after "
      "writing the checkpoint (with --checkpoint).");
  TrainConfig& config = options.config;

  // A repeated option takes its last value (so a script's defaults can be overridden by appending).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--dataset", config.datasets,
                 "mnist|cifar10|synthetic; two (comma-separated or repeated) train at once")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->capture_default_str();
  app.add_option("--mix", options.mix, "how two datasets are combined: zip|cycle|concat")
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
  app.add_option("--optimizer", options.optimizer, "sgd|adam")->capture_default_str();
  app.add_option("--seed", config.seed, "model initialisation and sampler seed")
      ->capture_default_str();
  app.add_option("--hidden", config.hidden, "hidden units of the MLP")->capture_default_str();
  app.add_flag("--no-shuffle", options.noShuffle, "DistributedSampler(shuffle=False)");
  app.add_flag("--no-eval", options.noEval, "skip the evaluation after each epoch");
  app.add_option("--dtype", options.dtype, "float32|float64")->capture_default_str();
  app.add_option("--checkpoint", config.checkpointPath,
                 "checkpoint file rank 0 writes (atomically) every K steps and at the end");
  app.add_option("--checkpoint-every", config.checkpointEvery, "K (0: only at the end)")
      ->capture_default_str();
  app.add_option("--resume", config.resumePath, "continue from this checkpoint");
  app.add_option("--report-json", config.reportJsonPath,
                 "write per-epoch figures and the final parameters here (rank 0)");
  app.add_option("--report-html", config.reportHtmlPath,
                 "write one self-contained HTML page here (rank 0): loss and throughput per step, "
                 "each dataset's seen / never seen per epoch, the verdict (docs/html-report.md)");
  app.add_option("--trace-samples", config.traceSamplesPath,
                 "every rank writes its audit trace (docs/trace-format.md), each batch with its "
                 "indices, to DIR/rank-<r>.jsonl; `ddp-sim audit DIR` checks it");
  app.add_option("--backend", options.backend, "auto|gloo|nccl (auto: nccl when a GPU is usable)")
      ->capture_default_str();
  app.add_option("--threads", config.threads,
                 "torch threads per rank (0: the cores divided among local ranks)")
      ->capture_default_str();
  app.add_option("--progress", options.progress,
                 "auto|bar|lines|none (auto: a bar on a terminal, lines otherwise)")
      ->capture_default_str();
  app.add_option("--timeout", config.timeoutSeconds,
                 "seconds: deadline of joining the world and of every collective")
      ->capture_default_str();
}

TrainConfig resolveTrainOptions(const TrainOptions& options) {
  TrainConfig config = options.config;
  config.mix = data::parseMix(options.mix);
  config.optimizer = parseOptimizer(options.optimizer);
  config.backend = parseBackend(options.backend);
  config.progress = parseProgressMode(options.progress);
  config.dtype = parseDType(options.dtype);
  config.shuffle = !options.noShuffle;
  config.eval = !options.noEval;
  return config;
}

}  // namespace ddph::train
