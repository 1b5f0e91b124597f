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
                                    int starAbove = 32, GlooEngine engine = GlooEngine::kDirect) {
  auto store = makeInProcessStore();
  std::vector<std::future<std::string>> results;
  for (int r = 0; r < world; ++r) {
    results.push_back(std::async(std::launch::async, [=] {
      try {
        GlooOptions options;
        options.engine = engine;
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

struct CollectiveCase {
  GlooEngine engine;
  int world;
  int starAbove;
};

std::string caseName(const ::testing::TestParamInfo<CollectiveCase>& info) {
  return std::string(info.param.engine == GlooEngine::kDirect ? "Direct" : "ProcessGroup") +
         "W" + std::to_string(info.param.world) + "StarAbove" +
         std::to_string(info.param.starAbove);
}

class GlooCollectives : public ::testing::TestWithParam<CollectiveCase> {};

// starCollectivesAbove 32: Gloo's own ring algorithms (or, direct engine, the exchange at W <= 4
// and the star for small payloads); 0: the star form (NOTE [Collectives at scale]) forced. Every
// variant must give the same exact results, for small payloads and for large ones (100k floats,
// DDP's bucket size; 20k int64 per rank gathered), with every rank getting the same bits.
TEST_P(GlooCollectives, GiveExactResults) {
  const int world = GetParam().world;
  const auto results = runThreads(world, 20s, [world](Communicator& c) {
    const int r = c.rank();
    const std::int64_t w = world;
    std::vector<float> f{static_cast<float>(r), 1.0f};
    c.allreduce(f, ReduceOp::kSum, "t0");
    if (f[0] != static_cast<float>(w * (w - 1) / 2) || f[1] != static_cast<float>(w))
      throw std::runtime_error("float sum");
    std::vector<std::int64_t> i{r, -r};
    c.allreduce(i, ReduceOp::kMax, "t1");
    if (i[0] != w - 1 || i[1] != 0) throw std::runtime_error("int max");
    // Variable lengths: rank r contributes r copies of r.
    auto all = c.allgather(std::vector<std::int64_t>(static_cast<std::size_t>(r), r), "t2");
    for (int q = 0; q < world; ++q) {
      if (all[q] != std::vector<std::int64_t>(static_cast<std::size_t>(q), q))
        throw std::runtime_error("allgather");
    }
    std::vector<std::int64_t> b{r == 2 ? 42 : 0};
    c.broadcast(b, 2, "t3");
    if (b[0] != 42) throw std::runtime_error("broadcast");
    c.barrier("t4");
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(world));
    for (int q = 0; q < world; ++q) lengths[q] = q;
    auto known = c.allgather(std::vector<std::int64_t>(static_cast<std::size_t>(r), 7), lengths,
                             "t5");
    if (known[world - 1] != std::vector<std::int64_t>(static_cast<std::size_t>(world - 1), 7))
      throw std::runtime_error("known lengths");
    // Large payloads: element k of rank r is (k % 97) + r, exact in a float.
    constexpr std::size_t kFloats = 100000;
    std::vector<float> big(kFloats);
    for (std::size_t k = 0; k < kFloats; ++k) big[k] = static_cast<float>(k % 97 + r);
    c.allreduce(big, ReduceOp::kSum, "t6");
    for (std::size_t k = 0; k < kFloats; ++k) {
      if (big[k] != static_cast<float>(static_cast<std::int64_t>(k % 97) * w + w * (w - 1) / 2))
        throw std::runtime_error("large float sum at " + std::to_string(k));
    }
    std::vector<double> raw(kFloats, r == 0 ? 0.5 : 0.25);
    c.allreduceAsync(raw.data(), raw.size(), ReduceOp::kSum, "t7")->wait();
    if (raw[kFloats - 1] != 0.5 + 0.25 * static_cast<double>(w - 1))
      throw std::runtime_error("async double sum");
    std::vector<float> params(kFloats, r == 0 ? 3.0f : 0.0f);
    c.broadcast(params.data(), params.size(), 0, "t8");
    if (params[kFloats / 2] != 3.0f) throw std::runtime_error("raw broadcast");
    constexpr std::int64_t kLongs = 20000;
    auto gathered = c.allgather(std::vector<std::int64_t>(kLongs, r),
                                std::vector<std::int64_t>(static_cast<std::size_t>(world), kLongs),
                                "t9");
    for (int q = 0; q < world; ++q) {
      if (gathered[q] != std::vector<std::int64_t>(kLongs, q))
        throw std::runtime_error("large allgather");
    }
  }, GetParam().starAbove, GetParam().engine);
  for (const auto& r : results) EXPECT_EQ(r, "ok");
}

INSTANTIATE_TEST_SUITE_P(
    RingExchangeAndStar, GlooCollectives,
    ::testing::Values(CollectiveCase{GlooEngine::kProcessGroup, 4, 32},
                      CollectiveCase{GlooEngine::kProcessGroup, 4, 0},
                      CollectiveCase{GlooEngine::kDirect, 3, 32},
                      CollectiveCase{GlooEngine::kDirect, 4, 32},
                      CollectiveCase{GlooEngine::kDirect, 4, 0},
                      CollectiveCase{GlooEngine::kDirect, 6, 32},
                      CollectiveCase{GlooEngine::kDirect, 11, 32},
                      CollectiveCase{GlooEngine::kDirect, 11, 0}),
    caseName);

class GlooEngines : public ::testing::TestWithParam<GlooEngine> {};

TEST_P(GlooEngines, MissingPeerTimesOutNamingOperationAndStep) {
  const auto start = std::chrono::steady_clock::now();
  const auto results = runThreads(3, 1500ms, [](Communicator& c) {
    c.barrier("warm-up");
    if (c.rank() == 2) {
      std::this_thread::sleep_for(3s);  // never joins the allreduce below
      return;
    }
    std::vector<float> f{1.0f};
    c.allreduce(f, ReduceOp::kSum, "epoch 0 step 5");
  }, 32, GetParam());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(results[r].find("timeout"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("allreduce"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("epoch 0 step 5"), std::string::npos) << results[r];
  }
  EXPECT_EQ(results[2], "ok");
}

// A rank that never connects: the others' connect runs into its deadline (TimeoutError).
TEST_P(GlooEngines, MissingRankTimesOutTheConnect) {
  auto store = makeInProcessStore();
  GlooOptions options;
  options.engine = GetParam();
  options.timeout = 1000ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(connectGloo(store, 0, 2, options), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

INSTANTIATE_TEST_SUITE_P(BothEngines, GlooEngines,
                         ::testing::Values(GlooEngine::kDirect, GlooEngine::kProcessGroup),
                         [](const ::testing::TestParamInfo<GlooEngine>& info) {
                           return info.param == GlooEngine::kDirect ? "Direct" : "ProcessGroup";
                         });

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
