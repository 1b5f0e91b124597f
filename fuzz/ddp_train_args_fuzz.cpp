// Fuzz target: ddp-train's command line (reference/train_options.cpp) parsed, its named choices
// resolved and the configuration validated as the trainer does before it starts, never training.
// The input is the arguments, one a line. CLI11's ParseError and ddph's ConfigError are the
// expected verdicts.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ddph/common/error.h"
#include "ddph/train/train_config.h"
#include "fuzz_target.h"
#include "train_options.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = ddph::fuzz::argumentsOf(data, size, "ddp-train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  CLI::App app{"ddp-train", "ddp-train"};
  ddph::train::TrainOptions options;
  ddph::train::addTrainOptions(app, options);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    ddph::train::validate(ddph::train::resolveTrainOptions(options));
  } catch (const CLI::ParseError&) {
  } catch (const ddph::common::ConfigError&) {
  }
  return 0;
}
