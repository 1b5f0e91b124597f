// gloo_allreduce_benchmark: the time of one Communicator::allreduce of DDP's gradient bucket
// (101,770 floats, the MLP 784-128-10 of ddp_step_benchmark) between W rank processes on this
// host, with an optional busy "compute" phase of --work-us before each one (as a training step has
// its forward and backward), so the figure includes what a step sees: the wake-ups, not only the
// bytes. Torch-free; the engine and wait mode come from the environment (DDPH_GLOO_ENGINE,
// DDPH_GLOO_WAIT: glooOptionsFromEnvironment). Not a test.
//
// Output, one line per world size: `allreduce W=<w> floats=<n> us=<mean microseconds per call>`
// (rank 0's view: the call's time, compute excluded).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/error.h"
#include "rank_world.h"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Config {
  int calls = 1000;
  int warmup = 50;
  std::size_t floats = 101770;
  int workUs = 0;
};

void spin(int us) {
  const auto end = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < end) {
  }
}

int runRank(int rank, int world, int port, const Config& config, const std::string& out) {
  auto store =
      ddph::comm::makeTcpStore("127.0.0.1", static_cast<std::uint16_t>(port), false, world, 60s);
  ddph::comm::GlooOptions options =
      ddph::comm::glooOptionsFromEnvironment();  // DDPH_GLOO_ENGINE, _WAIT
  options.timeout = 60s;
  auto comm = ddph::comm::connectGloo(store, rank, world, options, "allreduce-benchmark");
  std::vector<float> data(config.floats, static_cast<float>(rank));
  for (int i = 0; i < config.warmup; ++i)
    comm->allreduce(data, ddph::comm::ReduceOp::kSum, "warm-up");
  comm->barrier("benchmark start");
  Clock::duration inCalls{};
  for (int i = 0; i < config.calls; ++i) {
    spin(config.workUs);
    const auto start = Clock::now();
    comm->allreduce(data, ddph::comm::ReduceOp::kSum, "benchmark");
    inCalls += Clock::now() - start;
  }
  comm->barrier("benchmark end");
  ddph::bench::reportFromRank0(
      rank, out, std::chrono::duration<double, std::micro>(inCalls).count() / config.calls);
  return 0;
}

double runWorld(const std::string& self, int world, const Config& config) {
  return ddph::bench::runRankWorld(
      self, world,
      {"--calls", std::to_string(config.calls), "--warmup", std::to_string(config.warmup),
       "--floats", std::to_string(config.floats), "--work-us", std::to_string(config.workUs)});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("gloo_allreduce_benchmark: one gradient-bucket allreduce between rank processes");
  Config config;
  ddph::bench::RankArgs rank;
  std::vector<int> worlds{2, 4};
  app.add_option("--calls", config.calls, "timed allreduce calls")->check(CLI::PositiveNumber);
  app.add_option("--warmup", config.warmup, "untimed calls first")->check(CLI::NonNegativeNumber);
  app.add_option("--floats", config.floats, "floats per allreduce")->check(CLI::PositiveNumber);
  app.add_option("--work-us", config.workUs, "busy microseconds before each call")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--worlds", worlds, "world sizes to measure")->check(CLI::Range(2, 64));
  ddph::bench::addRankOptions(app, rank);
  CLI11_PARSE(app, argc, argv);
  try {
    if (rank.rank >= 0) return runRank(rank.rank, rank.world, rank.port, config, rank.out);
    const std::string self = std::filesystem::canonical("/proc/self/exe").string();
    for (int w : worlds) {
      fmt::print("allreduce W={} floats={} us={:.1f}\n", w, config.floats,
                 runWorld(self, w, config));
      std::fflush(stdout);
    }
    return ddph::common::kExitOk;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gloo_allreduce_benchmark: error: {}\n", e.what());
    return ddph::common::kExitRuntime;
  }
}
