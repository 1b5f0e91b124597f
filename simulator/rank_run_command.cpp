// ddp-sim rank-run: one rank of a scenario, joined through env:// (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT): the process-per-rank, exec'd form of what `ddp-sim run` does with forked ranks.
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/comm/rank_env.h"
#include "ddph/common/error.h"
#include "ddph/scenario/builtin_scenarios.h"
#include "ddph/scenario/rank_program.h"
#include "ddph/scenario/scenario_file.h"
#include "ddph/verify/property.h"

namespace ddph::sim {

using common::kExitOk;
using common::kExitViolation;
using verify::formatViolation;
using verify::Violation;

namespace {

// Prints what rank 0 finds, as it finds it.
class PrintingObserver final : public scenario::RankObserver {
 public:
  void onViolation(const Violation& v) override {
    fmt::print("FAIL {}\n", formatViolation(v));
    std::fflush(stdout);
    ++violations;
  }
  void onNote(const std::string& line) override { fmt::print("{}\n", line); }
  int violations = 0;
};

int runRankScenario(const std::string& nameOrPath) {
  scenario::Scenario s = scenario::resolveScenario(nameOrPath);
  const comm::RankEnv env = comm::rankEnvFromEnvironment();
  s.worldSize = env.worldSize;
  scenario::validateScenario(s);
  comm::RankWorld world = comm::initRankWorld(
      env, std::chrono::milliseconds(static_cast<std::int64_t>(s.timeoutS * 1000)), true,
      comm::glooOptionsFromEnvironment());
  PrintingObserver observer;
  const scenario::RankRunStats stats = scenario::runRankProgram(s, *world.comm, observer);
  world.comm->barrier("end of run");
  if (env.rank == 0) {
    fmt::print("rank 0: {} steps, {}\n", stats.steps,
               observer.violations == 0 ? "every property holds" : "violations found");
  }
  return observer.violations == 0 ? kExitOk : kExitViolation;
}

}  // namespace

Command addRankRunCommand(CLI::App& app) {
  auto scenario = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "rank-run", "One rank of a scenario, for `ddp-sim launch -n W -- ddp-sim rank-run NAME` "
                  "(env:// init; rank 0 prints violations, exit 1 if any)");
  sub->add_option("scenario", *scenario, "built-in scenario name or scenario file")->required();
  return {sub, [scenario] { return runRankScenario(*scenario); }};
}

}  // namespace ddph::sim
