// Every input of fuzz/regressions/ is refused, with the one-line message its fix intended: the
// replays (fuzz.<target>.corpus) only show that nothing crashes, this shows the input is turned
// away for the right reason. An input with no entry below fails the test, so a new regression
// input comes with its expected message.
#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "ddph/trace/trace.h"
#include "ddph/common/error.h"
#include "ddph/common/private_folder.h"
#include "ddph/scenario/scenario_file.h"
#include "ddph/train/train_config.h"
#include "fuzz_target.h"
#include "train_options.h"

namespace ddph::fuzz {

using common::ConfigError;
using common::PrivateFolder;

namespace {

namespace fs = std::filesystem;

const fs::path kRegressions = DDPH_FUZZ_REGRESSIONS_DIR;

std::string contentsOf(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The ConfigError one input of `target` gets from the library, as the fuzz target feeds it.
std::string verdictOf(const std::string& target, const fs::path& file) {
  const std::string text = contentsOf(file);
  try {
    if (target == "scenario_toml") {
      scenario::parseScenario(text, file.filename().string());
    } else if (target == "audit_trace") {
      // As audit_trace_fuzz.cpp: a rank's trace, then optionally the launcher's record.
      const std::string separator = "\n=== launch.json ===\n";
      const std::size_t cut = text.find(separator);
      const PrivateFolder folder("ddph-fuzz-regression-");
      std::ofstream(fs::path(folder.path()) / "rank-0.jsonl", std::ios::binary)
          << text.substr(0, cut);
      if (cut != std::string::npos) {
        std::ofstream(fs::path(folder.path()) / "launch.json", std::ios::binary)
            << text.substr(cut + separator.size());
      }
      trace::readTrace(folder.path());
    } else if (target == "ddp_train_args") {
      const auto args = fuzz::argumentsOf(reinterpret_cast<const std::uint8_t*>(text.data()),
                                          text.size(), "ddp-train");
      std::vector<const char*> argv;
      for (const auto& a : args) argv.push_back(a.c_str());
      CLI::App app{"ddp-train", "ddp-train"};
      train::TrainOptions options;
      train::addTrainOptions(app, options);
      app.parse(static_cast<int>(argv.size()), argv.data());
      train::validate(train::resolveTrainOptions(options));
    } else {
      return "no check for target " + target;
    }
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "accepted";
}

// target/file -> what the refusal must say (a part of the line).
const std::map<std::string, std::string> kExpected = {
    {"audit_trace/blank-line-then-cut-tail.jsonl", "rank-0.jsonl is empty (no header line)"},
    {"audit_trace/blank-lines-only.jsonl", "rank-0.jsonl is empty (no header line)"},
    {"audit_trace/launch-world-size-float.jsonl", "launch.json: \"world_size\" has the wrong type"},
    {"audit_trace/launch-exit-code-float.jsonl", "launch.json: \"exit_code\" has the wrong type"},
    {"audit_trace/backward-int64-max.jsonl", "\"backward\" 9223372036854775807 is not a count"},
    {"audit_trace/group-rank-float.jsonl", "\"ranks\" has the wrong type"},
    {"audit_trace/run-of-2-34-indices.jsonl",
     "a run has length 17179869184 (an index list holds at most 67108864 indices)"},
    {"audit_trace/run-past-int64-max.jsonl",
     "the run [9223372036854775807, 2] passes the largest index"},
    {"audit_trace/version-float-out-of-range.jsonl", "\"version\" has the wrong type"},
    {"audit_trace/world-size-huge.jsonl",
     "world size 2147483647 is above the reader's limit of 65536"},
    {"audit_trace/world-size-wraps.jsonl", "\"world_size\" is out of range: 4294967297"},
    {"scenario_toml/world-size-wraps-to-4.toml",
     "world-size-wraps-to-4.toml:1: key 'world_size': 4294967300 is out of range"},
    {"scenario_toml/timeout-inf.toml",
     "timeout-inf.toml:1: key 'timeout_s': must be positive and at most 604800 (a week), got inf"},
    {"scenario_toml/timeout-1e300.toml",
     "timeout-1e300.toml:1: key 'timeout_s': must be positive and at most 604800 (a week), got "
     "1e+300"},
    {"scenario_toml/timeout-nan.toml",
     "timeout-nan.toml:1: key 'timeout_s': must be positive and at most 604800 (a week), got nan"},
    {"scenario_toml/delay-ms-inf.toml",
     "delay-ms-inf.toml:5: key 'faults.delay.ms': must be between 0 and 604800000 (a week), got "
     "inf"},
    {"ddp_train_args/timeout-inf.txt",
     "--timeout must be positive and at most 604800 s (a week), got inf"},
    {"ddp_train_args/timeout-1e300.txt",
     "--timeout must be positive and at most 604800 s (a week), got 1e+300"},
};

TEST(FuzzRegressions, EveryInputIsRefusedWithItsMessage) {
  int checked = 0;
  for (const auto& targetDir : fs::directory_iterator(kRegressions)) {
    const std::string target = targetDir.path().filename().string();
    for (const auto& entry : fs::directory_iterator(targetDir.path())) {
      const std::string name = target + "/" + entry.path().filename().string();
      const auto expected = kExpected.find(name);
      if (expected == kExpected.end()) {
        ADD_FAILURE() << name << ": no expected message in " << __FILE__;
        continue;
      }
      const std::string verdict = verdictOf(target, entry.path());
      EXPECT_NE(verdict.find(expected->second), std::string::npos)
          << name << ": got \"" << verdict << "\", expected \"" << expected->second << "\"";
      EXPECT_EQ(verdict.find('\n'), std::string::npos) << name << ": not one line: " << verdict;
      ++checked;
    }
  }
  // Every entry has its input: a renamed or removed file is noticed.
  EXPECT_EQ(checked, static_cast<int>(kExpected.size()));
}

}  // namespace
}  // namespace ddph::fuzz
