// The straggler check over hand-made traces: a rank slow in every step is one; a rank the
// scheduler held back in a single step (2048 ranks on 2 cores) is not, though its mean over the
// steps is as high.
#include "straggler_check.h"

#include <gtest/gtest.h>

#include <vector>

namespace ddph::scenario {
namespace {

// Rank traces of `steps` steps: a batch, then `computeMs[step]` of compute, then an allreduce
// that every rank leaves at the same time (the slowest rank's arrival).
trace::Trace traceOf(const std::vector<std::vector<double>>& computeMs) {
  trace::Trace trace;
  trace.worldSize = static_cast<int>(computeMs.size());
  const std::size_t steps = computeMs.front().size();
  std::vector<double> stepEnd(steps + 1, 0.0);
  for (std::size_t k = 0; k < steps; ++k) {
    double slowest = 0;
    for (const auto& rank : computeMs) slowest = std::max(slowest, rank[k]);
    stepEnd[k + 1] = stepEnd[k] + (slowest + 2.0) / 1000.0;  // 2 ms in the allreduce itself
  }
  for (int r = 0; r < trace.worldSize; ++r) {
    trace::RankTrace t;
    t.rank = r;
    t.worldSize = trace.worldSize;
    trace::PassRecord pass;
    std::int64_t line = 1;
    for (std::size_t k = 0; k < steps; ++k) {
      trace::BatchRecord b;
      b.seq = static_cast<std::int64_t>(k);
      b.size = 1;
      b.line = ++line;
      b.t = stepEnd[k];
      pass.batches.push_back(b);
      trace::CollectiveRecord c;
      c.group = "0";
      c.seq = static_cast<std::int64_t>(k);
      c.op = "all_reduce";
      c.done = true;
      c.line = ++line;
      c.t = stepEnd[k] + computeMs[static_cast<std::size_t>(r)][k] / 1000.0;
      c.doneT = stepEnd[k + 1];
      t.collectives["0"].push_back(c);
    }
    t.passes.push_back(pass);
    t.lastT = stepEnd[steps];
    trace.ranks.push_back(t);
  }
  return trace;
}

TEST(Straggler, ARankSlowInEveryStepIsOne) {
  const auto v = findStragglers(traceOf({{0.01, 0.01, 0.01, 0.01, 0.01, 0.01},
                                         {40, 40, 40, 40, 40, 40},
                                         {0.01, 0.01, 0.01, 0.01, 0.01, 0.01},
                                         {0.01, 0.01, 0.01, 0.01, 0.01, 0.01}}));
  ASSERT_TRUE(v);
  EXPECT_EQ(v->property, "straggler");
  EXPECT_EQ(v->ranks, std::vector<std::int64_t>({1}));
}

TEST(Straggler, ARankHeldBackInOneStepIsNot) {
  // Its mean, 10 ms a step, is what a rank 10 ms slower in every step would show.
  EXPECT_FALSE(findStragglers(traceOf({{0.01, 0.01, 0.01, 0.01, 0.01, 0.01},
                                       {60, 0.01, 0.01, 0.01, 0.01, 0.01},
                                       {0.01, 0.01, 0.01, 0.01, 0.01, 0.01},
                                       {0.01, 0.01, 0.01, 0.01, 0.01, 0.01}})));
  EXPECT_TRUE(findStragglers(traceOf({{0.01, 0.01, 0.01, 0.01, 0.01, 0.01},
                                      {10, 10, 10, 10, 10, 10},
                                      {0.01, 0.01, 0.01, 0.01, 0.01, 0.01},
                                      {0.01, 0.01, 0.01, 0.01, 0.01, 0.01}})));
}

}  // namespace
}  // namespace ddph::scenario
