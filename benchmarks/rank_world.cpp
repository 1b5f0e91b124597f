#include "rank_world.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <memory>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "test_support.h"

namespace ddph::bench {

using common::ChildProcess;
using common::Error;
using common::writeFileAtomically;

using namespace std::chrono_literals;

void addRankOptions(CLI::App& app, RankArgs& args) {
  app.add_option("--rank", args.rank, "internal: run as this rank");
  app.add_option("--world", args.world, "internal");
  app.add_option("--port", args.port, "internal");
  app.add_option("--out", args.out, "internal");
}

double runRankWorld(const std::string& self, int world, const std::vector<std::string>& args) {
  test_support::TempDir dir("ddph-bench-world");
  auto store = comm::makeTcpStore("127.0.0.1", 0, true, world, 60s);
  const std::string port = std::to_string(store->port());
  const std::string out = dir.path() + "/rank0.value";
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv{self, "--rank", std::to_string(r), "--world",
                                  std::to_string(world), "--port", port};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--out", out});
    ranks.push_back(std::make_unique<ChildProcess>(argv));
  }
  const auto deadline = std::chrono::steady_clock::now() + 300s;
  for (int r = 0; r < world; ++r) {
    const int rc = test_support::exitCodeBy(*ranks[static_cast<std::size_t>(r)], deadline);
    if (rc != 0) throw Error(fmt::format("benchmark rank {} exited with {}", r, rc));
  }
  double value = 0;
  if (!(std::ifstream(out) >> value)) throw Error("benchmark rank 0 wrote no figure to " + out);
  return value;
}

void reportFromRank0(int rank, const std::string& out, double value) {
  if (rank == 0) writeFileAtomically(out, fmt::format("{}\n", value));
}

}  // namespace ddph::bench
