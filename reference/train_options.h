#pragma once
// ddp-train's command line, registered once: for main (ddp_train_main.cpp) and for the argument
// fuzzer (fuzz/ddp_train_args_fuzz.cpp), which parses command lines without training. Torch-free.
#include <CLI/CLI.hpp>

#include <string>

#include "ddph/train/train_config.h"

namespace ddph::train {

/// The command line as parsed, before its named choices are resolved.
struct TrainOptions {
  TrainConfig config;
  std::string mix = "zip", optimizer = "sgd", backend = "auto", progress = "auto",
              dtype = "float32";
  bool noShuffle = false, noEval = false;
};

/// Sets up `app` as ddp-train (version, footer) with every option, each bound to `options`.
void addTrainOptions(CLI::App& app, TrainOptions& options);

/// The configuration the options ask for: mix, optimizer, backend, progress and dtype resolved
/// (ConfigError naming an unknown one). The Gloo engine and the rank environment are left to main.
TrainConfig resolveTrainOptions(const TrainOptions& options);

}  // namespace ddph::train
