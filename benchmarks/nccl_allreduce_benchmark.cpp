// nccl_allreduce_benchmark: the bus bandwidth of ddph's NCCL allreduce (ddph::ddp::connectNccl,
// Communicator::allreduceAsync on device memory, what DistributedDataParallel calls per bucket),
// in nccl-tests' terms so that scripts/gpu-check.sh can put it beside `all_reduce_perf`.
// Built only against a CUDA LibTorch.
//
// One process per GPU, started like torchrun's ranks (`ddp-sim launch -n G -- ...`: RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; rank 0 hosts the store); without those
// variables one process, W = 1, on cuda:0. Every size is first checked once (exactly representable
// inputs; a wrong element makes the program exit 1, as nccl-tests does), then timed: `--warmup`
// untimed and `--iters` timed in-place float sum allreduces, the device synchronised after the
// last. Rank 0 prints, per size, nccl-tests' in-place columns:
//   size(B) count type redop time(us) algbw(GB/s) busbw(GB/s) #wrong
// algbw = bytes / time, busbw = algbw * 2(W-1)/W (0 at W = 1, as nccl-tests reports it).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/ddp/nccl_communicator.h"
#include "ddph/comm/rank_env.h"
#include "ddph/common/error.h"

namespace {

std::int64_t parseSize(const std::string& text) {
  std::size_t used = 0;
  const double value = std::stod(text, &used);
  const std::string unit = text.substr(used);
  double scale = 1;
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024.0;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024.0 * 1024.0;
  else DDPH_CHECK(unit.empty(), "size '{}': the unit must be K, M or G", text);
  return static_cast<std::int64_t>(value * scale);
}

int run(const std::string& minSize, const std::string& maxSize, double factor, int warmup,
        int iters, double timeoutS) {
  DDPH_CHECK(torch::cuda::is_available(), "no CUDA device is available");
  DDPH_CHECK(factor > 1.0 && iters > 0 && warmup >= 0, "need -f > 1, -n > 0, -w >= 0");
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeoutS * 1000));
  ddph::comm::RankEnv env;
  std::shared_ptr<ddph::comm::RendezvousStore> store;
  if (std::getenv("RANK") != nullptr) {
    env = ddph::comm::rankEnvFromEnvironment();
    store = ddph::comm::makeTcpStore(env.masterAddr, env.masterPort, env.rank == 0, env.worldSize,
                                     timeout);
  } else {
    store = ddph::comm::makeInProcessStore();
  }
  const int world = env.worldSize, rank = env.rank, device = env.localRank;
  DDPH_CHECK(device < static_cast<int>(torch::cuda::device_count()),
             "LOCAL_RANK {} has no GPU: this machine has {}", device, torch::cuda::device_count());
  auto comm = ddph::ddp::connectNccl(store, rank, world, device, timeout, "nccl-bench");
  const auto options = torch::TensorOptions().dtype(torch::kFloat)
                           .device(torch::Device(torch::kCUDA, static_cast<int16_t>(device)));
  const double busFactor = 2.0 * (world - 1) / world;
  const double sumOfRanks = world * (world + 1) / 2.0;
  if (rank == 0) {
    std::printf("# ddph nccl allreduce: W=%d, in place, float sum, %d warm-up + %d timed\n", world,
                warmup, iters);
    std::printf("#%11s %12s %6s %6s %10s %10s %10s %6s\n", "size(B)", "count", "type", "redop",
                "time(us)", "algbw", "busbw", "#wrong");
  }
  int wrongTotal = 0;
  for (std::int64_t bytes = std::max<std::int64_t>(4, parseSize(minSize));
       bytes <= parseSize(maxSize);
       bytes = std::max(bytes + 4, static_cast<std::int64_t>(bytes * factor))) {
    const std::int64_t count = bytes / 4;
    const auto n = static_cast<std::size_t>(count);
    // Check once: (i % 1024) * (rank + 1) sums exactly to (i % 1024) * W(W+1)/2.
    auto base = torch::arange(count, torch::TensorOptions().dtype(torch::kLong)).remainder(1024);
    auto data = (base * (rank + 1)).to(options).contiguous();
    comm->allreduceAsync(data.data_ptr<float>(), n, ddph::comm::ReduceOp::kSum, "check")->wait();
    const auto expected = (base.to(torch::kDouble) * sumOfRanks).to(options);
    const std::int64_t wrong = data.ne(expected).sum().item<std::int64_t>();
    wrongTotal += static_cast<int>(wrong > 0);

    auto buffer = torch::zeros({count}, options);
    for (int i = 0; i < warmup; ++i) {
      comm->allreduceAsync(buffer.data_ptr<float>(), n, ddph::comm::ReduceOp::kSum, "warm-up")
          ->wait();
    }
    torch::cuda::synchronize(device);
    comm->barrier("timing start");
    torch::cuda::synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      comm->allreduceAsync(buffer.data_ptr<float>(), n, ddph::comm::ReduceOp::kSum, "timed")
          ->wait();
    }
    torch::cuda::synchronize(device);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
    // The slowest rank's time, as nccl-tests reports it.
    std::vector<float> slowest{static_cast<float>(seconds)};
    comm->allreduce(slowest, ddph::comm::ReduceOp::kMax, "time");
    const double algbw = static_cast<double>(count * 4) / slowest[0] / 1e9;
    if (rank == 0) {
      std::printf("%12lld %12lld %6s %6s %10.2f %10.2f %10.2f %6lld\n",
                  static_cast<long long>(count * 4), static_cast<long long>(count), "float",
                  "sum", slowest[0] * 1e6, algbw, algbw * busFactor,
                  static_cast<long long>(wrong));
      std::fflush(stdout);
    }
  }
  comm->barrier("end");
  return wrongTotal > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Bus bandwidth of ddph's NCCL allreduce, in nccl-tests' columns"};
  std::string minSize = "1M", maxSize = "256M";
  double factor = 4.0, timeoutS = 120.0;
  int warmup = 5, iters = 20;
  app.add_option("-b,--minbytes", minSize, "smallest size (K, M, G suffixes)");
  app.add_option("-e,--maxbytes", maxSize, "largest size");
  app.add_option("-f,--stepfactor", factor, "size multiplier");
  app.add_option("-w,--warmup", warmup, "untimed iterations per size");
  app.add_option("-n,--iters", iters, "timed iterations per size");
  app.add_option("--timeout", timeoutS, "deadline of connecting and of every collective, s");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(minSize, maxSize, factor, warmup, iters, timeoutS);
  } catch (const ddph::common::ConfigError& e) {
    std::fprintf(stderr, "nccl_allreduce_benchmark: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_allreduce_benchmark: error: %s\n", e.what());
    return 3;
  }
}
