// The rank program thread-per-rank over an in-process store (no processes, no ports): the same
// code `ddp-sim run` forks, its trace judged as `ddp-sim run` judges it (audit::judge with the plan, scenario_plan.h).
#include "ddph/scenario/rank_program.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "ddph/trace/trace.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/private_folder.h"
#include "ddph/scenario/builtin_scenarios.h"
#include "ddph/audit/audit.h"
#include "scenario_plan.h"

using namespace std::chrono_literals;

namespace ddph::scenario {

using common::PrivateFolder;

using sampler::Violation;

namespace {

std::vector<Violation> runInThreads(const Scenario& s) {
  const PrivateFolder folder("ddph-rank-program-test-");
  const RankTraceTarget trace{folder.path(), "rank-program-test"};
  auto store = comm::makeInProcessStore();
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < s.worldSize; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      comm::GlooOptions options;
      options.timeout = 30s;
      auto comm = comm::connectGloo(store, r, s.worldSize, options);
      runRankProgram(s, *comm, trace);
    }));
  }
  for (auto& f : ranks) f.get();
  const trace::Trace t = trace::readTrace(folder.path());
  return audit::judge(t, planOf(s, t)).violations;
}

TEST(RankProgramThreads, HealthyHasNoViolation) {
  EXPECT_TRUE(runInThreads(builtinScenario("healthy")).empty());
}

TEST(RankProgramThreads, EachInProcessScenarioIsDiagnosed) {
  // rank-crash raises SIGKILL and slow-rank needs whole processes' timing: those run forked.
  for (const char* name : {"missing-set-epoch", "rank-seed-skew", "unsorted-file-listing",
                           "uneven-batches-hang", "drop-last-confusion", "padding-inflates-eval"}) {
    const Scenario s = builtinScenario(name);
    const auto violations = runInThreads(s);
    ASSERT_FALSE(violations.empty()) << name;
    EXPECT_EQ(violations.front().property, s.expect) << name;
  }
}

}  // namespace
}  // namespace ddph::scenario
