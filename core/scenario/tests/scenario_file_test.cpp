// Scenario files: the catalogue parses, and a bad file names the file, the line and the key.
#include "ddph/scenario/scenario_file.h"

#include <gtest/gtest.h>

#include <string>

#include "ddph/common/error.h"
#include "ddph/scenario/builtin_scenarios.h"

namespace ddph::scenario {

using common::ConfigError;

namespace {

std::string errorOf(const std::string& text) {
  try {
    parseScenario(text, "bad.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ScenarioFile, EveryBuiltinParsesAndNamesAProperty) {
  ASSERT_GE(builtinScenarios().size(), 11u);
  for (const auto& b : builtinScenarios()) {
    const Scenario s = builtinScenario(b.name);
    EXPECT_EQ(s.name, b.name);
    EXPECT_FALSE(s.description.empty()) << b.name;
    // Only the healthy run and the elastic sampler's fix of the resume bug pass.
    EXPECT_EQ(s.expect.empty(), b.name == "healthy" || b.name == "elastic-resume-fixed") << b.name;
  }
}

TEST(ScenarioFile, ParsesEveryKey) {
  const Scenario s = parseScenario(R"(name = "x"
world_size = 3
epochs = 4
seed = 7
batch_size = 5
drop_last = true
phase = "eval"
combine = "weighted"
weights = [2, 0.5]
timeout_s = 9.5
[[datasets]]
name = "a"
size = 10
sampler = "libtorch-random"
shuffle = false
sampler_drop_last = true
[[datasets]]
size = 20
[faults]
skip_set_epoch = true
per_rank_seed = true
per_rank_order = true
kill = { rank = 2, epoch = 1, step = 3 }
delay = { rank = 1, ms = 2.5 }
)",
                                   "ok.toml");
  EXPECT_EQ(s.worldSize, 3);
  EXPECT_EQ(s.epochs, 4);
  EXPECT_EQ(s.combine, Combine::kWeighted);
  ASSERT_EQ(s.weights.size(), 2u);
  EXPECT_EQ(s.datasets[0].sampler, "libtorch-random");
  EXPECT_EQ(s.datasets[1].name, "dataset1");
  EXPECT_EQ(s.datasets[1].size, 20);
  ASSERT_TRUE(s.faults.kill.has_value());
  EXPECT_EQ(s.faults.kill->step, 3);
  ASSERT_TRUE(s.faults.delay.has_value());
  EXPECT_DOUBLE_EQ(s.faults.delay->ms, 2.5);
}

TEST(ScenarioFile, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(errorOf("world_size = 4\nbatch_sise = 3\n[[datasets]]\nsize = 1\n"),
            "bad.toml:2: key 'batch_sise': unknown key");
  EXPECT_EQ(errorOf("world_size = \"four\"\n[[datasets]]\nsize = 1\n"),
            "bad.toml:1: key 'world_size': expected an integer");
  EXPECT_EQ(errorOf("[[datasets]]\nname = \"a\"\n"),
            "bad.toml:1: key 'datasets[0].size': is required");
  EXPECT_EQ(errorOf("[[datasets]]\nsize = 10\nsampler = \"magic\"\n"),
            "bad.toml:3: key 'datasets[0].sampler': 'magic' is not one of pytorch, elastic, "
            "libtorch-random, libtorch-sequential, strided");
  // [resume]: a stop and a resume of one epoch of one dataset, on at most the scenario's ranks.
  const std::string resumable = "world_size = 4\nepochs = 1\n[[datasets]]\nsize = 100\n";
  EXPECT_EQ(
      errorOf(resumable + "[resume]\nstop_after_steps = 3\nworld_size = 5\n"),
      "bad.toml:7: key 'resume.world_size': must be between 1 and the scenario's world_size (4)");
  EXPECT_EQ(errorOf(resumable + "[resume]\nworld_size = 2\n"),
            "bad.toml:5: key 'resume.stop_after_steps': is required");
  EXPECT_EQ(
      errorOf(
          "epochs = 2\n[[datasets]]\nsize = 100\n[resume]\nstop_after_steps = 3\nworld_size = 1\n"),
      "bad.toml:4: key 'resume': a stop and a resume need epochs = 1");
  EXPECT_EQ(errorOf(resumable +
                    "sampler = \"strided\"\n[resume]\nstop_after_steps = 3\nworld_size = 1\n"),
            "bad.toml:6: key 'resume': needs sampler = \"pytorch\" or \"elastic\" (equal shards on "
            "every rank)");
  EXPECT_EQ(errorOf("combine = \"interleave\"\n[[datasets]]\nsize = 1\n"),
            "bad.toml:1: key 'combine': 'interleave' is not one of zip, cycle, concat, weighted");
  EXPECT_EQ(errorOf("[[datasets]]\nsize = 1\n[faults]\nkill = { rank = 1 }\n"),
            "bad.toml:4: key 'faults.kill.step': is required");
  EXPECT_EQ(
      errorOf("world_size = 2\n[[datasets]]\nsize = 1\n[faults]\nkill = { rank = 5, step = 1 }\n"),
      "bad.toml: faults.kill.rank 5 is outside a world of 2 ranks");
  EXPECT_EQ(errorOf("expect = \"speed\"\n[[datasets]]\nsize = 1\n"),
            "bad.toml:1: key 'expect': 'speed' is not a property name");
  EXPECT_EQ(errorOf("world_size = 4\n"),
            "bad.toml:1: key 'datasets': at least one [[datasets]] table is required");
  // Syntax errors carry toml++'s line.
  const std::string syntax = errorOf("world_size = 4\nepochs = = 2\n");
  EXPECT_EQ(syntax.rfind("bad.toml:2: ", 0), 0u) << syntax;
}

// A value its key's type cannot hold is refused on one line, never cut or converted later:
// world_size = 4294967300 ran 4 ranks, timeout_s = inf reached a conversion to int64 milliseconds.
TEST(ScenarioFile, OutOfRangeValuesAreRefusedNotCut) {
  const std::string datasets = "[[datasets]]\nsize = 10\n";
  EXPECT_EQ(errorOf("world_size = 4294967300\n" + datasets),
            "bad.toml:1: key 'world_size': 4294967300 is out of range");
  EXPECT_EQ(errorOf("world_size = -4294967300\n" + datasets),
            "bad.toml:1: key 'world_size': -4294967300 is out of range");
  EXPECT_EQ(errorOf("epochs = 2147483648\n" + datasets),
            "bad.toml:1: key 'epochs': 2147483648 is out of range");
  const std::string timeoutError =
      "bad.toml:1: key 'timeout_s': must be positive and at most 604800 (a week), got ";
  EXPECT_EQ(errorOf("timeout_s = inf\n" + datasets), timeoutError + "inf");
  EXPECT_EQ(errorOf("timeout_s = nan\n" + datasets), timeoutError + "nan");
  EXPECT_EQ(errorOf("timeout_s = 1e300\n" + datasets), timeoutError + "1e+300");
  EXPECT_EQ(errorOf("timeout_s = 604800.5\n" + datasets), timeoutError + "604800.5");
  EXPECT_EQ(errorOf("timeout_s = 0\n" + datasets), timeoutError + "0");
  EXPECT_EQ(parseScenario("timeout_s = 604800\n" + datasets, "ok.toml").timeoutS, 604800.0);
  EXPECT_EQ(errorOf("world_size = 2\n" + datasets + "[faults]\ndelay = { rank = 1, ms = inf }\n"),
            "bad.toml:5: key 'faults.delay.ms': must be between 0 and 604800000 (a week), got inf");
}

}  // namespace
}  // namespace ddph::scenario
