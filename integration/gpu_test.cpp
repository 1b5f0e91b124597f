// GPU checks (label `gpu`): NCCL collectives through ddph::ddp::connectNccl,
// DistributedDataParallel on CUDA tensors against one process, and a short `ddp-train --backend
// nccl` run.
//
// Always built. Every test needs CUDA and reports SKIPPED (never passed) with the reason where
// there is none: a LibTorch without CUDA (DDPH_TORCH_HAS_CUDA is 0, e.g. Debian's 1.13), or no
// visible GPU. Designed for one GPU: W = 1 NCCL (a real communicator, collectives on device
// memory) and DDP on one GPU; the tests that need one GPU per rank skip with the count they found.
// scripts/gpu-check.sh builds and runs these against a CUDA LibTorch.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"
#include "ddph/config.h"

#if DDPH_TORCH_HAS_CUDA
#include "ddph/comm/gloo_communicator.h"
#include "ddph/ddp/nccl_communicator.h"
#include "ddph/ddp/distributed_data_parallel.h"
#endif

namespace {

using namespace std::chrono_literals;

constexpr auto kTimeout = std::chrono::milliseconds(60000);

/// Why the CUDA tests cannot run in this process; empty when they can.
std::string whyNoCuda() {
#if !DDPH_TORCH_HAS_CUDA
  return "this build's LibTorch " DDPH_TORCH_VERSION
         " has no CUDA (DDPH_TORCH_HAS_CUDA=0): configure against a CUDA LibTorch "
         "(scripts/gpu-check.sh) to run the GPU checks";
#else
  if (!torch::cuda::is_available()) {
    return "LibTorch has CUDA but no GPU is visible (torch::cuda::is_available() is false)";
  }
  return "";
#endif
}

int gpuCount() {
  return whyNoCuda().empty() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

// GTEST_SKIP returns from the test body, so these are macros.
#define DDPH_REQUIRE_CUDA()                                \
  do {                                                     \
    const std::string why = whyNoCuda();                   \
    if (!why.empty()) GTEST_SKIP() << why;                 \
  } while (0)
#define DDPH_REQUIRE_GPUS(n)                                                                    \
  do {                                                                                          \
    DDPH_REQUIRE_CUDA();                                                                        \
    if (gpuCount() < (n)) {                                                                     \
      GTEST_SKIP() << "needs " << (n) << " GPUs (one per NCCL rank), found " << gpuCount()   \
                   << ": the one-GPU tests cover this machine";                                 \
    }                                                                                           \
  } while (0)

TEST(GpuDevice, TensorRoundTripsThroughTheGpu) {
  DDPH_REQUIRE_CUDA();
  const auto cpu = torch::arange(0, 1000, torch::kFloat);
  const auto gpu = (cpu.to(torch::Device(torch::kCUDA, 0)) * 2 + 1).to(torch::kCPU);
  EXPECT_TRUE(torch::equal(gpu, cpu * 2 + 1));
  torch::cuda::synchronize();
}

#if DDPH_TORCH_HAS_CUDA

torch::Device cuda(int index) { return torch::Device(torch::kCUDA, static_cast<int16_t>(index)); }

/// Runs `body(rank)` on W threads, one NCCL rank (and GPU) each; returns the first failure.
template <typename Body>
std::string onThreadRanks(int world, Body body) {
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) return e;
  }
  return "";
}

/// NCCL on W thread ranks over one in-process store: allreduce (vector and device-pointer,
/// exactly representable values), broadcast, allgather with known lengths, barrier.
void checkNcclCollectives(int world) {
  auto store = ddph::comm::makeInProcessStore();
  const std::string failure = onThreadRanks(world, [&](int rank) {
    auto comm = ddph::ddp::connectNccl(store, rank, world, rank, kTimeout, "gpu-test");
    ASSERT_EQ(comm->backendName(), "nccl");
    const std::int64_t sumOfRanks = std::int64_t{world} * (world + 1) / 2;

    std::vector<float> small{1.0f * (rank + 1), 2.0f * (rank + 1), -3.0f * (rank + 1)};
    comm->allreduce(small, ddph::comm::ReduceOp::kSum, "vector allreduce");
    EXPECT_EQ(small, (std::vector<float>{1.0f * sumOfRanks, 2.0f * sumOfRanks,
                                        -3.0f * sumOfRanks}));

    for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1000}, std::int64_t{(1 << 20) + 3}}) {
      // i % 1024 * (rank + 1): sums stay exact in float.
      auto base = torch::arange(n, torch::TensorOptions().dtype(torch::kLong)).remainder(1024);
      auto data = (base * (rank + 1)).to(torch::kFloat).to(cuda(rank)).contiguous();
      auto pending = comm->allreduceAsync(data.data_ptr<float>(), static_cast<std::size_t>(n),
                                          ddph::comm::ReduceOp::kSum, "device allreduce");
      pending->wait();
      const auto got = data.to(torch::kCPU);
      EXPECT_TRUE(torch::equal(got, (base * sumOfRanks).to(torch::kFloat)))
          << "allreduce of " << n << " floats on " << world << " rank(s)";

      auto dbl = torch::full({n}, rank == 0 ? 0.25 : -7.0,
                             torch::TensorOptions().dtype(torch::kDouble).device(cuda(rank)));
      comm->broadcast(dbl.data_ptr<double>(), static_cast<std::size_t>(n), 0, "device broadcast");
      EXPECT_TRUE(torch::equal(dbl.to(torch::kCPU), torch::full({n}, 0.25, torch::kDouble)));
    }

    std::vector<std::int64_t> fromRoot{rank == 0 ? 42 : -1, rank == 0 ? 7 : -1};
    comm->broadcast(fromRoot, 0, "vector broadcast");
    EXPECT_EQ(fromRoot, (std::vector<std::int64_t>{42, 7}));

    std::vector<std::int64_t> lengths;
    for (int r = 0; r < world; ++r) lengths.push_back(r + 1);
    const std::vector<std::int64_t> mine(static_cast<std::size_t>(rank + 1), rank);
    const auto all = comm->allgather(mine, lengths, "allgather");
    ASSERT_EQ(static_cast<int>(all.size()), world);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(all[static_cast<std::size_t>(r)],
                std::vector<std::int64_t>(static_cast<std::size_t>(r + 1), r));
    }
    comm->barrier("end");
  });
  EXPECT_EQ(failure, "");
}

torch::nn::Sequential makeMlp() {
  torch::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(20, 16), torch::nn::ReLU(),
                               torch::nn::Linear(16, 4));
}

/// Parameters after `steps` SGD steps of DDP on W GPUs (rank r on cuda:r, batch `perRank`
/// rows of the global batch), and of one process on cuda:0 with the whole global batch.
void checkDdpMatchesOneProcess(int world) {
  constexpr int kSteps = 5;
  constexpr int kPerRank = 8;
  torch::manual_seed(11);
  std::vector<torch::Tensor> inputs, targets;
  for (int s = 0; s < kSteps; ++s) {
    inputs.push_back(torch::randn({world * kPerRank, 20}, torch::kDouble));
    targets.push_back(torch::randint(0, 4, {world * kPerRank}, torch::kLong));
  }
  auto train = [&](torch::nn::Sequential model, torch::Device device, int rank, int rows) {
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
    for (int s = 0; s < kSteps; ++s) {
      optimizer.zero_grad();
      auto x = inputs[s].narrow(0, rank * rows, rows).to(device);
      auto y = targets[s].narrow(0, rank * rows, rows).to(device);
      torch::nn::functional::cross_entropy(model->forward(x), y).backward();
      optimizer.step();
    }
  };

  auto single = makeMlp();
  single->to(cuda(0), torch::kDouble);
  train(single, cuda(0), 0, world * kPerRank);
  std::vector<torch::Tensor> expected;
  for (const auto& p : single->parameters()) expected.push_back(p.detach().to(torch::kCPU));

  auto store = ddph::comm::makeInProcessStore();
  std::vector<std::vector<torch::Tensor>> got(static_cast<std::size_t>(world));
  const std::string failure = onThreadRanks(world, [&](int rank) {
    auto comm = ddph::ddp::connectNccl(store, rank, world, rank, kTimeout, "gpu-ddp");
    auto model = makeMlp();
    model->to(cuda(rank), torch::kDouble);
    ddph::ddp::DistributedDataParallel ddp(model.ptr(), *comm);
    train(model, cuda(rank), rank, kPerRank);
    torch::cuda::synchronize(rank);
    for (const auto& p : model->parameters()) {
      got[static_cast<std::size_t>(rank)].push_back(p.detach().to(torch::kCPU));
    }
  });
  ASSERT_EQ(failure, "");
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(got[static_cast<std::size_t>(r)].size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const double diff = (got[static_cast<std::size_t>(r)][i] - expected[i]).abs().max().item<double>();
      const double scale = expected[i].abs().max().item<double>();
      EXPECT_LE(diff, 1e-10 * scale + 1e-14)
          << "rank " << r << " parameter " << i << " after " << kSteps << " steps on " << world
          << " GPU(s): max |ddp - single| = " << diff;
    }
  }
}

#endif  // DDPH_TORCH_HAS_CUDA

TEST(GpuNccl, CollectivesOnOneRank) {
  DDPH_REQUIRE_CUDA();
#if DDPH_TORCH_HAS_CUDA
  checkNcclCollectives(1);
#endif
}

TEST(GpuNccl, CollectivesOnTwoThreadRanks) {
  DDPH_REQUIRE_GPUS(2);
#if DDPH_TORCH_HAS_CUDA
  checkNcclCollectives(2);
#endif
}

TEST(GpuDdp, OneGpuMatchesOneProcess) {
  DDPH_REQUIRE_CUDA();
#if DDPH_TORCH_HAS_CUDA
  checkDdpMatchesOneProcess(1);
#endif
}

TEST(GpuDdp, TwoGpusMatchOneProcess) {
  DDPH_REQUIRE_GPUS(2);
#if DDPH_TORCH_HAS_CUDA
  checkDdpMatchesOneProcess(2);
#endif
}

// ddp-train with NCCL: W = the number of GPUs (one rank per GPU, at most 8) under ddp-sim launch,
// so that even W = 1 joins a process group; a synthetic dataset (no files needed).
TEST(GpuTrain, DdpTrainWithNcclBackend) {
  DDPH_REQUIRE_CUDA();
  const std::string train = DDPH_DDP_TRAIN;
  const std::string sim = DDPH_DDP_SIM;
  const int world = std::min(gpuCount(), 8);
  ddph::test_support::TempDir dir("ddph-gpu-train");
  const std::string report = dir.path() + "/report.json";
  ddph::common::ChildProcess child(
      {sim, "launch", "-n", std::to_string(world), "--timeout", "240", "--", train, "--backend",
       "nccl", "--dataset", "synthetic", "--dataset-size", "4096", "--steps", "20",
       "--batch-size", "32", "--seed", "1", "--no-eval", "--progress", "none", "--report-json",
       report});
  const int rc = ddph::test_support::exitCodeBy(child, std::chrono::steady_clock::now() + 300s);
  ASSERT_EQ(rc, 0) << "ddp-sim launch -n " << world << " -- ddp-train --backend nccl "
                   << (rc == -1 ? "ran past 300 s" : "failed");
  std::ifstream in(report);
  ASSERT_TRUE(in) << "no report at " << report;
  const auto json = nlohmann::json::parse(in);
  EXPECT_EQ(json.at("world_size").get<int>(), world);
  ASSERT_FALSE(json.at("epochs").empty());
  int steps = 0;
  for (const auto& e : json.at("epochs")) {
    steps += e.at("steps").get<int>();
    EXPECT_TRUE(std::isfinite(e.at("loss").get<double>())) << e.dump();
  }
  EXPECT_EQ(steps, 20);
  EXPECT_GT(json.at("samples_per_s").get<double>(), 0.0);
}

}  // namespace
