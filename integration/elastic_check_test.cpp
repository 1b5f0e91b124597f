// Elastic resume end to end (NOTE [Elastic resume]): the Python ElasticDistributedSampler keeps
// the `elastic` contract through the line protocol and is the C++ ElasticSampler index for index;
// torch's own DistributedSampler is reported as not elastic, with what it does; the built-ins'
// counterexamples replay with `ddp-sim sampler --resume`.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

#include "ddph/common/error.h"
#include "ddph/sampler/elastic_sampler.h"
#include "ddph/sampler/line_protocol_sampler.h"
#include "ddph/sampler/sampler_checks.h"
#include "test_support.h"

namespace ddph::sampler {

using common::ConfigError;

namespace {

using namespace std::chrono_literals;
using test_support::CommandResult;
using test_support::countLines;
using test_support::runCommand;

const std::string kDdpSim = DDPH_DDP_SIM;
const std::string kPython = DDPH_PYTHON;  // "" when no interpreter imports torch
const std::string kPackages = DDPH_PYTHON_PACKAGE_DIR;
const std::string kExamples = DDPH_EXAMPLES_DIR;

#define REQUIRE_TORCH_PYTHON() \
  if (kPython.empty()) GTEST_SKIP() << "no Python that imports torch (DDPH_PYTHON)"

CommandResult checkSampler(std::vector<std::string> args) {
  args.insert(args.begin(), {kDdpSim, "check-sampler", "--contract", "elastic"});
  return runCommand(args, 600s, "", {{"PYTHONPATH", kPackages}});
}

std::string shown(const CommandResult& r) { return r.out + r.err; }

TEST(ElasticCheck, PythonElasticSamplerKeepsTheContract) {
  REQUIRE_TORCH_PYTHON();
  const CommandResult r = checkSampler({"--", kPython, "-m", "ddph_elastic"});
  ASSERT_EQ(r.exitCode, 0) << shown(r);
  EXPECT_EQ(countLines(r.out, "  ok   "), 10) << r.out;
  EXPECT_NE(r.out.find("  ok   resume-exactly-once 100 cases"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASSED: contract 'elastic' holds"), std::string::npos) << r.out;
}

TEST(ElasticCheck, PythonAndCppElasticSamplersAgreeIndexForIndex) {
  REQUIRE_TORCH_PYTHON();
  ASSERT_EQ(::setenv("PYTHONPATH", kPackages.c_str(), 1), 0);  // the sampler process inherits it
  for (const bool dropLast : {false, true}) {
    for (const bool shuffle : {true, false}) {
      std::vector<std::string> command{kPython, "-m", "ddph_elastic"};
      if (dropLast) command.push_back("--drop-last");
      if (!shuffle) command.push_back("--no-shuffle");
      LineProtocolSampler python(command);
      DistributedSamplerOptions options;
      options.dropLast = dropLast;
      options.shuffle = shuffle;
      ElasticSampler cpp(options);
      int compared = 0, refused = 0;
      for (std::int64_t n : {0, 1, 7, 10, 33, 100}) {
        for (std::int64_t w : {1, 3, 4}) {
          for (const auto& resume : std::vector<std::vector<ResumePoint>>{
                   {}, {{2, 1}}, {{4, n / 8}}, {{1, n / 3}, {5, n / 20}}}) {
            const SamplerCase c{n, w, 2, 41, resume};
            bool possible = true;
            try {
              elasticRunStart(n, resume, dropLast);
            } catch (const ConfigError&) {
              possible = false;  // e.g. 2 ranks that consumed 1 sample each of an empty dataset
            }
            if (!possible) {  // both refuse it: the Python one with the protocol's error answer
              EXPECT_THROW(python.partition(c), ConfigError) << formatCase(c);
              EXPECT_THROW(cpp.partition(c), ConfigError) << formatCase(c);
              ++refused;
              continue;
            }
            const Partition a = python.partition(c), b = cpp.partition(c);
            EXPECT_EQ(a.ranks, b.ranks) << formatCase(c) << " drop_last=" << dropLast;
            EXPECT_EQ(a.declaredLengths, b.declaredLengths) << formatCase(c);
            ++compared;
          }
        }
      }
      EXPECT_EQ(compared + refused, 72);
      EXPECT_GE(compared, 60);
    }
  }
}

TEST(ElasticCheck, TorchDistributedSamplerIsReportedAsNotElastic) {
  REQUIRE_TORCH_PYTHON();
  const CommandResult r =
      checkSampler({"--cases", "25", "--", kPython, kExamples + "/python/torch_sampler.py"});
  ASSERT_EQ(r.exitCode, 1) << shown(r);
  // DistributedSampler's own promises hold; resuming is what it cannot do.
  EXPECT_EQ(countLines(r.out, "  ok   "), 8) << r.out;  // seven of pytorch's and resume-balance
  EXPECT_NE(r.out.find("  FAIL resume-exactly-once minimal case"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  FAIL resume-order        minimal case"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ignores the resume and restarts the epoch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"resume\":[{\"num_replicas\":"), std::string::npos) << r.out;
}

TEST(ElasticCheck, BuiltinCounterexamplesReplayWithResume) {
  CommandResult r = checkSampler({"--builtin", "elastic"});
  EXPECT_EQ(r.exitCode, 0) << shown(r);
  r = checkSampler({"--builtin", "pytorch", "--properties", "resume-exactly-once"});
  ASSERT_EQ(r.exitCode, 1) << shown(r);
  const auto at = r.out.find("replay: ddp-sim sampler --sampler pytorch");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string replay = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(replay.find(" --resume "), std::string::npos) << replay;
  // The replay runs, and says what the sampler does with the resume.
  std::vector<std::string> argv{kDdpSim};
  std::size_t from = replay.find("sampler ");
  for (std::size_t to; from != std::string::npos; from = to == std::string::npos ? to : to + 1) {
    to = replay.find(' ', from);
    argv.push_back(replay.substr(from, to == std::string::npos ? std::string::npos : to - from));
  }
  const CommandResult replayed = runCommand(argv, 60s);
  EXPECT_EQ(replayed.exitCode, 0) << shown(replayed);
  EXPECT_NE(replayed.out.find("this sampler ignores it and restarts the epoch"), std::string::npos)
      << replayed.out;
}

}  // namespace
}  // namespace ddph::sampler
