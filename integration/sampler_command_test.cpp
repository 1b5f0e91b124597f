// `ddp-sim sampler` as users run it: LibTorch loaded only when asked for (NOTE [LibTorch on
// demand]), the streamed JSON equal to the sampler's own indices, and a clear error where the
// on-demand library is missing.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "ddph/sampler/batching.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/libtorch_samplers.h"
#include "test_support.h"

namespace {

using namespace std::chrono_literals;
using ddph::test_support::CommandResult;
using ddph::test_support::runCommand;
namespace fs = std::filesystem;

const std::string kSim = DDPH_DDP_SIM;

// The dynamic loader's own account of every file it opened (glibc's LD_DEBUG=files, on stderr).
CommandResult runWithLoaderLog(const std::vector<std::string>& argv) {
  return runCommand(argv, 120s, "", {{"LD_DEBUG", "files"}});
}

bool opened(const CommandResult& r, const std::string& library) {
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    const auto file = line.find("file=");
    if (file != std::string::npos && line.find(library, file) != std::string::npos) return true;
  }
  return false;
}

TEST(SamplerCommand, TorchFreeCommandsNeverLoadLibTorch) {
  const auto r = runWithLoaderLog({kSim, "sampler", "-N", "10", "-W", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("rank   0: 5 indices [4, 7, 3, 0, 6]"), std::string::npos) << r.out;
  EXPECT_FALSE(opened(r, "libtorch_cpu")) << "LibTorch was loaded for a torch-free command";
  EXPECT_FALSE(opened(r, "libddph_libtorch.so"));
}

// The negative control of the test above: the same log shows LibTorch when a command needs it.
TEST(SamplerCommand, LibTorchSamplersLoadItOnDemand) {
  const auto r = runWithLoaderLog({kSim, "sampler", "-N", "10", "-W", "2", "--sampler",
                                   "libtorch-random"});
  ASSERT_EQ(r.exitCode, 0) << r.err.substr(0, 2000);
  EXPECT_TRUE(opened(r, "libddph_libtorch.so"));
  EXPECT_TRUE(opened(r, "libtorch_cpu"));
  ddph::sampler::LibTorchSampler sampler(ddph::sampler::LibTorchSamplerKind::kRandom);
  const auto rank1 = sampler.indices({10, 2, 1, 0, 0});
  EXPECT_NE(r.out.find(fmt::format("rank   1: 5 indices [{}]", fmt::join(rank1, ", "))),
            std::string::npos)
      << r.out;
}

TEST(SamplerCommand, JsonHoldsTheSamplersIndicesAndBatches) {
  const auto r = runCommand({kSim, "sampler", "-N", "23", "-W", "3", "--epoch", "2", "--seed",
                             "7", "--batch-size", "4", "--check", "--json"},
                            120s);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("dataset_size"), 23);
  EXPECT_EQ(j.at("world_size"), 3);
  ddph::sampler::DistributedSampler sampler;
  ASSERT_EQ(j.at("ranks").size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const auto& jr = j.at("ranks").at(rank);
    const auto expected = sampler.indices({23, 3, rank, 2, 7});
    EXPECT_EQ(jr.at("rank"), rank);
    EXPECT_EQ(jr.at("indices").get<std::vector<ddph::sampler::Index>>(), expected);
    EXPECT_EQ(jr.at("batches").get<std::vector<std::vector<ddph::sampler::Index>>>(),
              ddph::sampler::makeBatches(expected, {4, false}));
  }
  EXPECT_TRUE(j.at("violations").empty());
}

TEST(SamplerCommand, MissingLibTorchLibraryIsAOneLineError) {
  // A copy of ddp-sim with no <libdir>/libddph_libtorch.so beside it (nor installed: the test
  // expects the install libdir not to hold one).
  ddph::test_support::TempDir dir;
  const fs::path bin = fs::path(dir.path()) / "bin";
  fs::create_directories(bin);
  const fs::path copy = bin / "ddp-sim";
  fs::copy_file(kSim, copy);
  const auto plain = runCommand({copy.string(), "sampler", "-N", "10", "-W", "2"}, 120s);
  EXPECT_EQ(plain.exitCode, 0) << plain.err;  // torch-free: works without it
  const auto r = runCommand({copy.string(), "sampler", "-N", "10", "-W", "2", "--sampler",
                             "libtorch-sequential"},
                            120s);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("LibTorch's part of ddp-harness cannot be loaded"), std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
