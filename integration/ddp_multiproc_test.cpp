// DDP over real processes: W rank processes (ddp_rank_worker) meet through a TCPStore that this
// test hosts on 127.0.0.1 (a free port picked by the OS), train with DistributedDataParallel over
// Gloo, and must end with the parameters of one process trained on the global batch.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/ddp/gradient_equivalence.h"
#include "test_support.h"

using namespace std::chrono_literals;

namespace ddph::ddp {

using common::ChildProcess;

namespace {

std::vector<double> readDoubles(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<double> out(bytes.size() / sizeof(double));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(double));
  return out;
}

struct Outcome {
  std::vector<int> exitCodes;
  std::vector<std::vector<double>> params;
};

// `timeoutMs` is each rank's deadline for the rendezvous and every collective: generous by default
// (four processes loading LibTorch on two loaded cores), short where a failure is the point.
Outcome runWorld(int world, const std::string& model, const std::string& optimizer, int steps,
                 int killRank = -1, int timeoutMs = 240000) {
  test_support::TempDir dir("ddph-ddp-multiproc");
  auto store = comm::makeTcpStore("127.0.0.1", 0, true, world, 30s);
  const auto port = std::to_string(store->port());
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int r = 0; r < world; ++r) {
    children.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DDPH_RANK_WORKER, "--port", port, "--rank", std::to_string(r), "--world",
        std::to_string(world), "--model", model, "--optimizer", optimizer, "--steps",
        std::to_string(steps), "--seed", "7", "--timeout-ms", std::to_string(timeoutMs), "--out",
        dir.path() + "/rank" + std::to_string(r)}));
  }
  if (killRank >= 0) children[static_cast<std::size_t>(killRank)].reset();  // SIGKILL at once
  Outcome outcome;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs) + 120s;
  for (int r = 0; r < world; ++r) {
    if (r == killRank) {
      outcome.exitCodes.push_back(128 + 9);
      outcome.params.emplace_back();
      continue;
    }
    outcome.exitCodes.push_back(
        test_support::exitCodeBy(*children[static_cast<std::size_t>(r)], deadline));
    outcome.params.push_back(readDoubles(dir.path() + "/rank" + std::to_string(r)));
  }
  return outcome;
}

ddp::TrainingSetup workerSetup(int world, const std::string& model, const std::string& optimizer,
                               int steps) {
  // Must match ddp_rank_worker's setup.
  ddp::TrainingSetup s;
  s.model.kind = model == "conv" ? ddp::ModelKind::kConvNet : ddp::ModelKind::kMlp;
  if (s.model.kind == ddp::ModelKind::kConvNet) s.model.inputs = 2;
  s.model.hidden = {8, 5};
  s.model.outputs = 3;
  s.worldSize = world;
  s.batchPerRank = 2;
  s.steps = steps;
  s.seed = 7;
  s.optimizer = optimizer == "sgd" ? ddp::OptimizerKind::kSgdMomentum : ddp::OptimizerKind::kAdam;
  s.bucketCapBytes = 256;
  return s;
}

void expectMatchesSingleProcess(int world, const std::string& model, const std::string& optimizer) {
  const int steps = 3;
  const Outcome outcome = runWorld(world, model, optimizer, steps);
  const std::vector<double> expected =
      ddp::trainSingleProcess(workerSetup(world, model, optimizer, steps));
  ASSERT_FALSE(expected.empty());
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(outcome.exitCodes[static_cast<std::size_t>(r)], 0) << "rank " << r;
    const auto& got = outcome.params[static_cast<std::size_t>(r)];
    ASSERT_EQ(got.size(), expected.size()) << "rank " << r;
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      scale = std::max(scale, std::abs(expected[i]));
      worst = std::max(worst, std::abs(got[i] - expected[i]));
    }
    // float64: the documented tolerance (NOTE [Equivalence tolerances]).
    EXPECT_LE(worst, 1e-12 * scale + 1e-15) << "rank " << r;
  }
}

TEST(DdpMultiProcess, FourProcessesMatchOneProcessMlpAdam) { expectMatchesSingleProcess(4, "mlp", "adam"); }

TEST(DdpMultiProcess, ThreeProcessesMatchOneProcessConvSgd) { expectMatchesSingleProcess(3, "conv", "sgd"); }

// A rank process that dies makes its peers fail within their deadline instead of hanging (exit
// code 1, not the -1 of a rank still running 2 minutes past its deadline).
TEST(DdpMultiProcess, KilledRankMakesPeersFailWithinDeadline) {
  const Outcome outcome = runWorld(3, "mlp", "adam", 3, /*killRank=*/1, /*timeoutMs=*/10000);
  EXPECT_EQ(outcome.exitCodes[0], 1);
  EXPECT_EQ(outcome.exitCodes[2], 1);
}

// SIGKILL of a rank in the middle of a large gradient allreduce (DDP step 1, buckets of 25 MB of
// float64 gradients on the wire): its peers fail at once with an error naming that step, not at
// their collective deadline. The kill lands on the bytes the victim has written, not on a timer
// (integration/support/kill_inside_allreduce.h). The peers' deadline is 10 minutes and this test's
// wait for them 9: a peer that waited for its deadline instead of failing fails the test.
TEST(DdpMultiProcess, RankKilledInsideALargeGradientAllreduceFailsItsPeersNamingTheStep) {
  const int world = 3, victim = 1;
  test_support::TempDir dir("ddph-ddp-kill");
  auto store = comm::makeTcpStore("127.0.0.1", 0, true, world, 30s);
  std::vector<std::vector<std::string>> argvs;
  for (int r = 0; r < world; ++r) {
    argvs.push_back({DDPH_RANK_WORKER, "--port", std::to_string(store->port()), "--rank",
                     std::to_string(r), "--world", std::to_string(world), "--optimizer", "sgd",
                     "--inputs", "512", "--hidden", "2048,2048", "--steps", "3",
                     "--timeout-ms", "600000", "--out", dir.path() + "/rank" + std::to_string(r)});
    if (r == victim) {
      for (const char* arg : {"--kill-inside-allreduce", "1", "--kill-report"}) argvs.back().push_back(arg);
      argvs.back().push_back(dir.path() + "/kill");
    }
  }
  const auto results = test_support::runCommands(argvs, 9min);
  const std::string where = test_support::readFile(dir.path() + "/kill");
  std::cout << "the kill: " << where << "\n" << results[0].err << results[2].err;
  EXPECT_EQ(results[victim].exitCode, 128 + SIGKILL) << results[victim].err;
  EXPECT_FALSE(where.empty()) << "the victim did not die where it was told to";
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const auto& peer = results[static_cast<std::size_t>(r)];
    EXPECT_EQ(peer.exitCode, 1) << "rank " << r << ": " << peer.err;
    EXPECT_NE(peer.err.find("allreduce at DDP step 1 failed (a peer died or left)"), std::string::npos)
        << "rank " << r << ": " << peer.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/rank" + std::to_string(r)));
  }
}

}  // namespace
}  // namespace ddph::ddp
