// The rank program thread-per-rank over an in-process store (no processes, no ports): the same
// code `ddp-sim run` forks, judged through a collecting observer.
#include "ddph/scenario/rank_program.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/scenario/builtin_scenarios.h"

using namespace std::chrono_literals;

namespace ddph::scenario {

using verify::Violation;

namespace {

class Collect final : public RankObserver {
 public:
  void onViolation(const Violation& v) override {
    std::lock_guard<std::mutex> lock(mutex_);
    violations.push_back(v);
  }
  std::mutex mutex_;
  std::vector<Violation> violations;
};

std::vector<Violation> runInThreads(const Scenario& s) {
  auto store = comm::makeInProcessStore();
  Collect observer;
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < s.worldSize; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      comm::GlooOptions options;
      options.timeout = 30s;
      auto comm = comm::connectGloo(store, r, s.worldSize, options);
      runRankProgram(s, *comm, observer);
    }));
  }
  for (auto& f : ranks) f.get();
  return observer.violations;
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
