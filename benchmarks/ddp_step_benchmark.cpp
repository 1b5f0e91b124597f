// ddp_step_benchmark: the time of one training step of an MLP 784-128-10 on MNIST-shaped data
// (random; step time does not depend on the values), batch 64 per rank, one thread per rank,
// plain (no DDP, one process) and with ddph::ddp::DistributedDataParallel over Gloo with W rank
// processes (this program re-started with --rank, meeting through a TCPStore it hosts on
// 127.0.0.1). Not a test: benchmarks/run_ddp_benchmark.sh runs it beside the Python peer
// (torch DDP, gloo) and prints the ratios.
//
// Output, one line per measurement: `cpp <plain|ddp> W=<w> step_ms=<mean ms per step>`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/error.h"
#include "ddph/ddp/distributed_data_parallel.h"
#include "rank_world.h"

using namespace std::chrono_literals;

namespace {

struct Config {
  int steps = 300;
  int warmup = 30;
  int batch = 64;
};

torch::nn::Sequential makeModel() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(784, 128), torch::nn::ReLU(),
                               torch::nn::Linear(128, 10));
}

// Runs warmup + steps training steps; returns the mean milliseconds per timed step.
double trainLoop(torch::nn::Sequential& net, const Config& config, int rank,
                 ddph::comm::Communicator* comm) {
  torch::manual_seed(100 + rank);
  constexpr int kBatches = 8;
  std::vector<at::Tensor> inputs, targets;
  for (int i = 0; i < kBatches; ++i) {
    inputs.push_back(torch::rand({config.batch, 784}));
    targets.push_back(torch::randint(0, 10, {config.batch}, torch::kLong));
  }
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.01));
  auto step = [&](int i) {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(inputs[i % kBatches]),
                                                     targets[i % kBatches]);
    loss.backward();
    optimizer.step();
  };
  for (int i = 0; i < config.warmup; ++i) step(i);
  if (comm != nullptr) comm->barrier("benchmark start");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < config.steps; ++i) step(i);
  if (comm != nullptr) comm->barrier("benchmark end");
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / config.steps;
}

int runRank(int rank, int world, int port, const Config& config, const std::string& out) {
  torch::set_num_threads(1);
  auto store =
      ddph::comm::makeTcpStore("127.0.0.1", static_cast<std::uint16_t>(port), false, world, 60s);
  ddph::comm::GlooOptions options =
      ddph::comm::glooOptionsFromEnvironment();  // DDPH_GLOO_ENGINE, _WAIT
  options.timeout = 60s;
  auto comm = ddph::comm::connectGloo(store, rank, world, options, "ddp-benchmark");
  auto net = makeModel();
  ddph::ddp::DistributedDataParallel ddp(net.ptr(), *comm);
  const double ms = trainLoop(net, config, rank, comm.get());
  ddph::bench::reportFromRank0(rank, out, ms);
  return 0;
}

double runWorld(const std::string& self, int world, const Config& config) {
  return ddph::bench::runRankWorld(
      self, world,
      {"--steps", std::to_string(config.steps), "--warmup", std::to_string(config.warmup)});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("ddp_step_benchmark: C++ DDP step time against a plain step");
  Config config;
  ddph::bench::RankArgs rank;
  std::vector<int> worlds{1, 2, 4};
  app.add_option("--steps", config.steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", config.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--worlds", worlds, "world sizes to measure")->check(CLI::Range(1, 64));
  ddph::bench::addRankOptions(app, rank);
  CLI11_PARSE(app, argc, argv);
  try {
    if (rank.rank >= 0) return runRank(rank.rank, rank.world, rank.port, config, rank.out);
    torch::set_num_threads(1);
    auto net = makeModel();
    fmt::print("cpp plain W=1 step_ms={:.4f}\n", trainLoop(net, config, 0, nullptr));
    std::fflush(stdout);
    const std::string self = std::filesystem::canonical("/proc/self/exe").string();
    for (int w : worlds) {
      fmt::print("cpp ddp W={} step_ms={:.4f}\n", w, runWorld(self, w, config));
      std::fflush(stdout);
    }
    return ddph::common::kExitOk;
  } catch (const ddph::common::ConfigError& e) {
    fmt::print(stderr, "ddp_step_benchmark: error: {}\n", e.what());
    return ddph::common::kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ddp_step_benchmark: error: {}\n", e.what());
    return ddph::common::kExitRuntime;
  }
}
