// ddp-sim rank-selftest: a tiny env:// rank program (joins the world, one allreduce) for tests.
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "commands.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/comm/rank_env.h"
#include "ddph/common/error.h"
#include "ddph/common/timeouts.h"

namespace ddph::sim {

using common::checkTimeoutOption;
using common::kExitOk;
using common::kExitViolation;

namespace {

int runSelfTest(double timeoutS) {
  checkTimeoutOption("--timeout", timeoutS);
  const comm::RankEnv env = comm::rankEnvFromEnvironment();
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeoutS * 1000.0));
  comm::RankWorld world = comm::initRankWorld(env, timeout, /*perRankLoopback=*/true,
                                              comm::glooOptionsFromEnvironment());
  std::vector<std::int64_t> value{env.rank + 1};
  world.comm->allreduce(value, comm::ReduceOp::kSum, "self-test");
  const std::int64_t expected = static_cast<std::int64_t>(env.worldSize) * (env.worldSize + 1) / 2;
  world.comm->barrier("self-test end");
  fmt::print("rank {} of {}: allreduce sum {} (expected {}) {}\n", env.rank, env.worldSize,
             value[0], expected, value[0] == expected ? "ok" : "WRONG");
  return value[0] == expected ? kExitOk : kExitViolation;
}

}  // namespace

Command addRankSelfTestCommand(CLI::App& app) {
  auto timeout = std::make_shared<double>(60.0);
  CLI::App* sub = app.add_subcommand(
      "rank-selftest", "A rank program for `ddp-sim launch`: env:// init, one allreduce, check");
  sub->group("");  // hidden: a test helper
  sub->add_option("--timeout", *timeout, "deadline of every wait, seconds");
  return {sub, [timeout] { return runSelfTest(*timeout); }};
}

}  // namespace ddph::sim
