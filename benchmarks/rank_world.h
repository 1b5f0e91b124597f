#pragma once
// The rank-process world of the C++ benchmarks (ddp_step_benchmark, gloo_allreduce_benchmark):
// the program starts W copies of itself as ranks against a TCP store it serves, and rank 0 hands
// its figure back through a file.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace ddph::bench {

/// What runRankWorld hands each rank it starts: --rank, --world, --port, --out.
struct RankArgs {
  int rank = -1;  ///< -1: this process is not a rank but the benchmark itself
  int world = 1;
  int port = 0;
  std::string out;
};

/// Registers the ranks' options on a benchmark's command line (marked internal in its --help).
void addRankOptions(CLI::App& app, RankArgs& args);

/// Runs `self --rank r --world W --port P <args> --out FILE` for r = 0..W-1 against a TCP store on
/// 127.0.0.1 served here, waits for every rank (a 300 s deadline; ranks still running are killed)
/// and returns the number rank 0 wrote with reportFromRank0. Throws ddph::common::Error naming a
/// rank that failed.
double runRankWorld(const std::string& self, int world, const std::vector<std::string>& args);

/// A rank's side: rank 0 writes `value` to `out` atomically; other ranks write nothing.
void reportFromRank0(int rank, const std::string& out, double value);

}  // namespace ddph::bench
