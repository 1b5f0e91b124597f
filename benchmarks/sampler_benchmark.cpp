// bench-sampler: how fast ddph::sampler::DistributedSampler produces every rank's indices for one
// epoch.
//
// Not a test: it prints timings (median of --repeats runs) as JSON for
// benchmarks/sampler_benchmark.py, which measures Python's DistributedSampler in the same run and
// prints the ratios. Measured here:
//   partition  DistributedSampler::partition(): one permutation shared by all ranks (what ddp-sim
//              does);
//   per-rank   DistributedSampler::indices() once per rank: every rank builds its own permutation,
//              as PyTorch's ranks do;
//   randperm   the permutation alone, RandpermImpl::kLibTorch against kReplica.
// Each result carries a checksum of every rank's indices so the driver can check that C++ and
// Python produced the same thing.
//
// `--one-rank` computes only rank 0's indices and exits: the driver runs it in a fresh process and
// reads its peak RSS (wait4), to show the sampler holds at most one permutation of N at a time.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "ddph/common/error.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/randperm.h"

namespace {

using ddph::sampler::Index;
using Clock = std::chrono::steady_clock;

// Order-sensitive checksum of a rank's indices, computed identically (uint64 wrap-around) by the
// Python driver with numpy: sum over positions k of (index + 1) * (k * 2654435761 + 1).
std::uint64_t checksum(const std::vector<Index>& indices) {
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < indices.size(); ++k) {
    sum += (static_cast<std::uint64_t>(indices[k]) + 1) * (static_cast<std::uint64_t>(k) * 2654435761ULL + 1);
  }
  return sum;
}

double seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Runs `body` `repeats` times; returns {"seconds": [...], "median_s": m, "checksums": [...]} where
// the checksums come from the last run.
template <typename Body>
nlohmann::ordered_json measure(int repeats, Body body) {
  std::vector<double> times;
  std::vector<std::uint64_t> sums;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    auto ranks = body();
    times.push_back(seconds(start));
    sums.clear();
    for (const auto& r : ranks) sums.push_back(checksum(r));
  }
  return {{"seconds", times}, {"median_s", median(times)}, {"checksums", sums}};
}

ddph::sampler::RandpermImpl parseImpl(const std::string& name) {
  if (name == "auto") return ddph::sampler::RandpermImpl::kAuto;
  if (name == "libtorch") return ddph::sampler::RandpermImpl::kLibTorch;
  if (name == "replica") return ddph::sampler::RandpermImpl::kReplica;
  throw ddph::common::ConfigError(
      fmt::format("--randperm must be auto, libtorch or replica, got '{}'", name));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times ddph::DistributedSampler for every rank of one epoch (JSON on stdout)",
               "bench-sampler"};
  std::int64_t n = 10'000'000;
  std::int64_t w = 8;
  std::int64_t epoch = 0;
  std::int64_t seed = 0;
  int repeats = 5;
  bool oneRank = false;
  std::string impl = "auto";
  app.add_option("--dataset-size,-N", n, "number of samples N")->capture_default_str();
  app.add_option("--world-size,-W", w, "number of replicas W")->capture_default_str();
  app.add_option("--epoch", epoch, "epoch")->capture_default_str();
  app.add_option("--seed", seed, "sampler seed")->capture_default_str();
  app.add_option("--repeats", repeats, "runs per measurement (the median is reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--randperm", impl, "auto | libtorch | replica (for the samplers)")
      ->capture_default_str();
  app.add_flag("--one-rank", oneRank, "compute only rank 0's indices once and exit (peak-RSS probe)");
  CLI11_PARSE(app, argc, argv);

  try {
    DDPH_CHECK(n >= 0 && w > 0, "need N >= 0 and W > 0, got N={} W={}", n, w);
    ddph::sampler::DistributedSamplerOptions options;
    options.randperm = parseImpl(impl);
    ddph::sampler::DistributedSampler sampler(options);

    if (oneRank) {
      const auto indices = sampler.indices({n, w, 0, epoch, seed});
      fmt::print("{{\"dataset_size\":{},\"world_size\":{},\"rank\":0,\"length\":{},\"checksum\":{}}}\n",
                 n, w, indices.size(), checksum(indices));
      return ddph::common::kExitOk;
    }

    nlohmann::ordered_json out = {{"dataset_size", n}, {"world_size", w}, {"epoch", epoch},
                                  {"seed", seed}, {"repeats", repeats}, {"randperm", impl}};
    out["partition"] = measure(repeats, [&] { return sampler.partition({n, w, epoch, seed}).ranks; });
    out["per_rank"] = measure(repeats, [&] {
      std::vector<std::vector<Index>> ranks;
      for (std::int64_t r = 0; r < w; ++r) ranks.push_back(sampler.indices({n, w, r, epoch, seed}));
      return ranks;
    });
    // The generator seed DistributedSampler uses (seed + epoch, wrapped as manual_seed does).
    const auto generatorSeed = static_cast<std::uint64_t>(seed) + static_cast<std::uint64_t>(epoch);
    out["randperm_libtorch"] = measure(repeats, [&] {
      return std::vector<std::vector<Index>>{
          ddph::sampler::torchRandperm(n, generatorSeed, ddph::sampler::RandpermImpl::kLibTorch)};
    });
    out["randperm_replica"] = measure(repeats, [&] {
      return std::vector<std::vector<Index>>{
          ddph::sampler::torchRandperm(n, generatorSeed, ddph::sampler::RandpermImpl::kReplica)};
    });
    fmt::print("{}\n", out.dump());
    return ddph::common::kExitOk;
  } catch (const ddph::common::ConfigError& e) {
    fmt::print(stderr, "bench-sampler: error: {}\n", e.what());
    return ddph::common::kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench-sampler: internal error: {}\n", e.what());
    return ddph::common::kExitRuntime;
  }
}
