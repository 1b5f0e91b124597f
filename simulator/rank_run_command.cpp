// ddp-sim rank-run: one rank of a scenario, joined through env:// (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT): the process-per-rank, exec'd form of what `ddp-sim run` does with forked ranks.
// Its ranks learn at run time only that they disagree on the number of steps (NOTE [Step
// agreement]); the properties are judged over its trace, under `ddp-sim launch --audit`.
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "commands.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/comm/rank_env.h"
#include "ddph/common/error.h"
#include "ddph/scenario/builtin_scenarios.h"
#include "ddph/scenario/rank_program.h"
#include "ddph/scenario/scenario_file.h"
#include "ddph/sampler/property.h"

namespace ddph::sim {

using common::kExitOk;
using common::kExitViolation;
using sampler::formatViolation;

namespace {

int runRankScenario(const std::string& nameOrPath) {
  scenario::Scenario s = scenario::resolveScenario(nameOrPath);
  const comm::RankEnv env = comm::rankEnvFromEnvironment();
  s.worldSize = env.worldSize;
  scenario::validateScenario(s);
  comm::RankWorld world = comm::initRankWorld(
      env, std::chrono::milliseconds(static_cast<std::int64_t>(s.timeoutS * 1000)), true,
      comm::glooOptionsFromEnvironment());
  const scenario::RankRunStats stats = scenario::runRankProgram(s, *world.comm);
  world.comm->barrier("end of run");
  if (env.rank == 0) {
    if (stats.stepMismatch) fmt::print("FAIL {}\n", formatViolation(*stats.stepMismatch));
    fmt::print("rank 0: {} steps, {}\n", stats.steps,
               stats.stepMismatch ? "the ranks disagreed on the number of steps"
                                  : "every rank ran every step (the properties: run it under "
                                    "`ddp-sim launch --audit`)");
  }
  return env.rank == 0 && stats.stepMismatch ? kExitViolation : kExitOk;  // rank 0 speaks
}

}  // namespace

Command addRankRunCommand(CLI::App& app) {
  auto scenario = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "rank-run",
      "One rank of a scenario, for `ddp-sim launch -n W -- ddp-sim rank-run NAME` "
      "(env:// init; traced and judged under `launch --audit`; rank 0 prints a "
      "step disagreement, exit 1)");
  sub->add_option("scenario", *scenario, "built-in scenario name or scenario file")->required();
  sub->footer(exitCodesFooter({"this rank passed", "a property was violated or a collective failed",
                               "bad arguments, scenario or environment (one line)",
                               "an internal error", ""}));
  return {sub, [scenario] { return runRankScenario(*scenario); }};
}

}  // namespace ddph::sim
