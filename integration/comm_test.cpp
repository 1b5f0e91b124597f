// The Gloo communicator, thread-per-rank over an in-process store: every collective gives exactly
// predictable results, and a missing peer turns into a TimeoutError naming the operation and step.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/error.h"

using namespace std::chrono_literals;

namespace ddph {
namespace {

// Runs body(rank, comm) on `world` thread ranks; returns what each rank's body returned (or threw).
std::vector<std::string> runThreads(int world, std::chrono::milliseconds timeout,
                                    const std::function<void(Communicator&)>& body,
                                    int starAbove = 32) {
  auto store = makeInProcessStore();
  std::vector<std::future<std::string>> results;
  for (int r = 0; r < world; ++r) {
    results.push_back(std::async(std::launch::async, [=] {
      try {
        GlooOptions options;
        options.timeout = timeout;
        options.starCollectivesAbove = starAbove;
        auto comm = connectGloo(store, r, world, options);
        body(*comm);
        return std::string("ok");
      } catch (const TimeoutError& e) {
        return std::string("timeout: ") + e.what();
      } catch (const std::exception& e) {
        return std::string("error: ") + e.what();
      }
    }));
  }
  std::vector<std::string> out;
  for (auto& f : results) out.push_back(f.get());
  return out;
}

class GlooCollectives : public ::testing::TestWithParam<int> {};

// Param: starCollectivesAbove. 32: Gloo's own ring algorithms at W = 4; 0: the star form
// (NOTE [Collectives at scale]) forced at W = 4. Both must give the same exact results.
TEST_P(GlooCollectives, GiveExactResults) {
  constexpr int kWorld = 4;
  const auto results = runThreads(kWorld, 20s, [](Communicator& c) {
    const int r = c.rank();
    std::vector<float> f{static_cast<float>(r), 1.0f};
    c.allreduce(f, ReduceOp::kSum, "t0");
    if (f[0] != 6.0f || f[1] != 4.0f) throw std::runtime_error("float sum");
    std::vector<std::int64_t> i{r, -r};
    c.allreduce(i, ReduceOp::kMax, "t1");
    if (i[0] != 3 || i[1] != 0) throw std::runtime_error("int max");
    // Variable lengths: rank r contributes r copies of r.
    auto all = c.allgather(std::vector<std::int64_t>(static_cast<std::size_t>(r), r), "t2");
    for (int q = 0; q < kWorld; ++q) {
      if (all[q] != std::vector<std::int64_t>(static_cast<std::size_t>(q), q))
        throw std::runtime_error("allgather");
    }
    std::vector<std::int64_t> b{r == 2 ? 42 : 0};
    c.broadcast(b, 2, "t3");
    if (b[0] != 42) throw std::runtime_error("broadcast");
    c.barrier("t4");
    auto known = c.allgather(std::vector<std::int64_t>(static_cast<std::size_t>(r), 7),
                             {0, 1, 2, 3}, "t5");
    if (known[3] != std::vector<std::int64_t>{7, 7, 7}) throw std::runtime_error("known lengths");
  }, GetParam());
  for (const auto& r : results) EXPECT_EQ(r, "ok");
}

INSTANTIATE_TEST_SUITE_P(RingAndStar, GlooCollectives, ::testing::Values(32, 0));

TEST(GlooCommunicator, MissingPeerTimesOutNamingOperationAndStep) {
  const auto start = std::chrono::steady_clock::now();
  const auto results = runThreads(3, 1500ms, [](Communicator& c) {
    c.barrier("warm-up");
    if (c.rank() == 2) {
      std::this_thread::sleep_for(3s);  // never joins the allreduce below
      return;
    }
    std::vector<float> f{1.0f};
    c.allreduce(f, ReduceOp::kSum, "epoch 0 step 5");
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(results[r].find("timeout"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("allreduce"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("epoch 0 step 5"), std::string::npos) << results[r];
  }
  EXPECT_EQ(results[2], "ok");
}

TEST(GlooCommunicator, StoreWaitHasADeadline) {
  auto store = makeInProcessStore();
  try {
    store->get("never-set", 200ms, "rendezvous");
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never-set"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddph
