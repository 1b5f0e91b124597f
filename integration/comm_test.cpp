// The Gloo communicator, thread-per-rank over an in-process store: every collective gives exactly
// predictable results with every engine and wait mode (GlooWait), a missing peer turns into a
// TimeoutError naming the operation and step, and a peer that leaves into a ProtocolError.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/error.h"
#include "ddph/config.h"

using namespace std::chrono_literals;

namespace ddph::comm {

using common::ConfigError;
using common::ProtocolError;
using common::TimeoutError;

namespace {

comm::GlooOptions makeOptions(std::chrono::milliseconds timeout, int starAbove = 32,
                              comm::GlooEngine engine = comm::GlooEngine::kDirect,
                              comm::GlooWait wait = comm::GlooWait::kAuto) {
  comm::GlooOptions options;
  options.engine = engine;
  options.timeout = timeout;
  options.starCollectivesAbove = starAbove;
  options.wait = wait;
  return options;
}

// Counts events across thread ranks; wait() blocks until `count` happened (or a generous
// deadline passed): how one rank learns that the others are done, without guessing a time.
class Latch {
 public:
  explicit Latch(int count) : left_(count) {}
  void arrive() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--left_ <= 0) done_.notify_all();
  }
  bool wait(std::chrono::seconds deadline = std::chrono::seconds(120)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return done_.wait_for(lock, deadline, [this] { return left_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  int left_;
};

// Runs body(rank, comm) on `world` thread ranks; returns what each rank's body returned (or threw).
// `closed(rank)` runs once that rank's communicator is gone (its sockets closed).
std::vector<std::string> runThreads(int world, const comm::GlooOptions& options,
                                    const std::function<void(comm::Communicator&)>& body,
                                    const std::function<void(int)>& closed = {}) {
  auto store = comm::makeInProcessStore();
  std::vector<std::future<std::string>> results;
  for (int r = 0; r < world; ++r) {
    results.push_back(std::async(std::launch::async, [=] {
      try {
        {
          auto comm = comm::connectGloo(store, r, world, options);
          body(*comm);
        }
        if (closed) closed(r);
        return std::string("ok");
      } catch (const TimeoutError& e) {
        return std::string("timeout: ") + e.what();
      } catch (const ProtocolError& e) {
        return std::string("peer: ") + e.what();
      } catch (const std::exception& e) {
        return std::string("error: ") + e.what();
      }
    }));
  }
  std::vector<std::string> out;
  for (auto& f : results) out.push_back(f.get());
  return out;
}

std::string waitName(comm::GlooWait wait) {
  switch (wait) {
    case comm::GlooWait::kAuto:
      return "Auto";
    case comm::GlooWait::kLoopThread:
      return "LoopThread";
    case comm::GlooWait::kSync:
      return "Sync";
    case comm::GlooWait::kBusyPoll:
      return "BusyPoll";
  }
  return "?";
}

struct CollectiveCase {
  comm::GlooEngine engine;
  int world;
  int starAbove;
  comm::GlooWait wait = comm::GlooWait::kAuto;
};

std::string caseName(const ::testing::TestParamInfo<CollectiveCase>& info) {
  return std::string(info.param.engine == comm::GlooEngine::kDirect ? "Direct" : "ProcessGroup") +
         "W" + std::to_string(info.param.world) + "StarAbove" +
         std::to_string(info.param.starAbove) + waitName(info.param.wait);
}

// Every rank's 64-bit FNV-1a hash of `values`' bits, gathered: equal on every rank or not.
template <typename T>
bool sameBitsEverywhere(comm::Communicator& c, const std::vector<T>& values,
                        std::string_view step) {
  std::uint64_t hash = 14695981039346656037ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size() * sizeof(T); ++i) {
    hash = (hash ^ bytes[i]) * 1099511628211ull;
  }
  std::int64_t mine;
  std::memcpy(&mine, &hash, sizeof mine);
  const auto all = c.allgather(std::vector<std::int64_t>{mine}, step);
  for (const auto& other : all) {
    if (other != all[0]) return false;
  }
  return true;
}

class GlooCollectives : public ::testing::TestWithParam<CollectiveCase> {};

// starCollectivesAbove 32: Gloo's own ring algorithms (or, direct engine, the exchange at W <= 4
// and the star for small payloads); 0: the star form (NOTE [Collectives at scale]) forced. Every
// variant must give the same exact results, for small payloads and for large ones (100k floats,
// DDP's bucket size; 20k int64 per rank gathered), with every rank getting the same bits.
TEST_P(GlooCollectives, GiveExactResults) {
  const int world = GetParam().world;
  const CollectiveCase& param = GetParam();
  const comm::GlooOptions options = makeOptions(20s, param.starAbove, param.engine, param.wait);
  const auto results = runThreads(world, options, [world](comm::Communicator& c) {
    const int r = c.rank();
    const std::int64_t w = world;
    std::vector<float> f{static_cast<float>(r), 1.0f};
    c.allreduce(f, comm::ReduceOp::kSum, "t0");
    if (f[0] != static_cast<float>(w * (w - 1) / 2) || f[1] != static_cast<float>(w))
      throw std::runtime_error("float sum");
    std::vector<std::int64_t> i{r, -r};
    c.allreduce(i, comm::ReduceOp::kMax, "t1");
    if (i[0] != w - 1 || i[1] != 0) throw std::runtime_error("int max");
    // Variable lengths: rank r contributes r copies of r.
    auto all = c.allgather(std::vector<std::int64_t>(static_cast<std::size_t>(r), r), "t2");
    for (int q = 0; q < world; ++q) {
      if (all[q] != std::vector<std::int64_t>(static_cast<std::size_t>(q), q))
        throw std::runtime_error("allgather");
    }
    std::vector<std::int64_t> b{r == world - 1 ? 42 : 0};
    c.broadcast(b, world - 1, "t3");
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
    c.allreduce(big, comm::ReduceOp::kSum, "t6");
    for (std::size_t k = 0; k < kFloats; ++k) {
      if (big[k] != static_cast<float>(static_cast<std::int64_t>(k % 97) * w + w * (w - 1) / 2))
        throw std::runtime_error("large float sum at " + std::to_string(k));
    }
    std::vector<double> raw(kFloats, r == 0 ? 0.5 : 0.25);
    c.allreduceAsync(raw.data(), raw.size(), comm::ReduceOp::kSum, "t7")->wait();
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
    // Back-to-back large allreduces of changing sizes and types over the same pairs, min and max
    // included: element k of rank r is k + 1000 r (exact), results known.
    for (const std::size_t n : {kFloats, std::size_t{50001}, kFloats}) {
      std::vector<std::int64_t> ints(n);
      for (std::size_t k = 0; k < n; ++k) ints[k] = static_cast<std::int64_t>(k) + 1000 * r;
      auto low = ints;
      c.allreduce(ints, comm::ReduceOp::kMax, "t10");
      c.allreduce(low, comm::ReduceOp::kMin, "t11");
      if (ints[n - 1] != static_cast<std::int64_t>(n - 1) + 1000 * (w - 1) || low[n - 1] !=
          static_cast<std::int64_t>(n - 1))
        throw std::runtime_error("large int max/min at n = " + std::to_string(n));
    }
    // Sums that round: every rank must still get the same bits (one reduction order).
    std::vector<float> inexact(kFloats);
    for (std::size_t k = 0; k < kFloats; ++k) {
      inexact[k] = 0.1f * static_cast<float>(k % 13 + 1) / static_cast<float>(r + 3);
    }
    c.allreduce(inexact, comm::ReduceOp::kSum, "t12");
    if (!sameBitsEverywhere(c, inexact, "t13")) throw std::runtime_error("ranks differ in bits");
  });
  for (const auto& r : results) EXPECT_EQ(r, "ok");
}

INSTANTIATE_TEST_SUITE_P(
    RingExchangeAndStar, GlooCollectives,
    ::testing::Values(CollectiveCase{comm::GlooEngine::kProcessGroup, 4, 32},
                      CollectiveCase{comm::GlooEngine::kProcessGroup, 4, 0},
                      CollectiveCase{comm::GlooEngine::kDirect, 2, 32},
                      CollectiveCase{comm::GlooEngine::kDirect, 2, 32, comm::GlooWait::kLoopThread},
                      CollectiveCase{comm::GlooEngine::kDirect, 2, 32, comm::GlooWait::kBusyPoll},
                      CollectiveCase{comm::GlooEngine::kDirect, 3, 32},
                      CollectiveCase{comm::GlooEngine::kDirect, 3, 32, comm::GlooWait::kLoopThread},
                      CollectiveCase{comm::GlooEngine::kDirect, 4, 32},
                      CollectiveCase{comm::GlooEngine::kDirect, 4, 32, comm::GlooWait::kLoopThread},
                      CollectiveCase{comm::GlooEngine::kDirect, 4, 32, comm::GlooWait::kBusyPoll},
                      CollectiveCase{comm::GlooEngine::kDirect, 4, 0},
                      CollectiveCase{comm::GlooEngine::kDirect, 6, 32},
                      CollectiveCase{comm::GlooEngine::kDirect, 11, 32},
                      CollectiveCase{comm::GlooEngine::kDirect, 11, 0}),
    caseName);

// Three thread ranks meet in a barrier; ranks 0 and 1 then run an allreduce ("epoch 0 step 5")
// that rank 2 never joins: it leaves once both have failed. What each rank's body returned or threw.
std::vector<std::string> runWithRank2Missing(const comm::GlooOptions& options) {
  Latch othersDone(2);
  return runThreads(3, options, [&](comm::Communicator& c) {
    c.barrier("warm-up");
    if (c.rank() == 2) {
      othersDone.wait();
      return;
    }
    std::vector<float> f{1.0f};
    try {
      c.allreduce(f, comm::ReduceOp::kSum, "epoch 0 step 5");
    } catch (...) {
      othersDone.arrive();
      throw;
    }
  });
}

class GlooEngines : public ::testing::TestWithParam<comm::GlooEngine> {};

// Ranks 0 and 1 run an allreduce that rank 2 never joins. The rank whose own wait is on rank 2
// times out; Gloo then closes that rank's pairs (its timeout is signalled to every pair of the
// context), so a rank still waiting on *it* may fail first with "a peer died or left" rather than
// its own timeout: both are right, and which one comes first is scheduling (under load, a fresh
// clone's ctest saw rank 1 get the closed pair every time). Every rank must fail, at least one by
// the timeout, each naming the operation and the step.
TEST_P(GlooEngines, MissingPeerTimesOutNamingOperationAndStep) {
  const auto results = runWithRank2Missing(makeOptions(1500ms, 32, GetParam()));
  int timedOut = 0;
  for (int r = 0; r < 2; ++r) {
    const bool timeout = results[r].rfind("timeout: ", 0) == 0;
    const bool peerLeft = results[r].rfind("peer: ", 0) == 0;
    timedOut += timeout ? 1 : 0;
    EXPECT_TRUE(timeout || peerLeft) << results[r];
    EXPECT_NE(results[r].find("allreduce"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("epoch 0 step 5"), std::string::npos) << results[r];
  }
  EXPECT_GE(timedOut, 1) << results[0] << "\n" << results[1];
  EXPECT_EQ(results[2], "ok");
}

// A rank that never connects: the others' connect runs into its deadline (TimeoutError).
TEST_P(GlooEngines, MissingRankTimesOutTheConnect) {
  auto store = comm::makeInProcessStore();
  comm::GlooOptions options;
  options.engine = GetParam();
  options.timeout = 1000ms;
  EXPECT_THROW(comm::connectGloo(store, 0, 2, options), TimeoutError);
}

INSTANTIATE_TEST_SUITE_P(BothEngines, GlooEngines,
                         ::testing::Values(comm::GlooEngine::kDirect,
                                           comm::GlooEngine::kProcessGroup),
                         [](const ::testing::TestParamInfo<comm::GlooEngine>& info) {
                           return info.param == comm::GlooEngine::kDirect ? "Direct"
                                                                          : "ProcessGroup";
                         });

// The direct engine's exchange allreduce (W <= 4, payloads over 64 KiB) in every wait mode
// (NOTE [Sync pairs]): a missing peer, a peer that leaves, and a timeout changed after connecting.
// A build without the direct engine (NOTE [Which Gloo]) has no wait modes to test.
#define DDPH_REQUIRE_DIRECT_GLOO()                                                    \
  do {                                                                                \
    if (!DDPH_HAVE_DIRECT_GLOO) GTEST_SKIP() << "this build has no direct Gloo engine"; \
  } while (0)

class ExchangeWaits : public ::testing::TestWithParam<comm::GlooWait> {
 protected:
  void SetUp() override { DDPH_REQUIRE_DIRECT_GLOO(); }
};

constexpr std::size_t kBucketFloats = 100000;  // DDP's bucket of the benchmark MLP, about

// The wait is bounded by the deadline, not by the payload: the error names the 1.5 s deadline,
// and a wait per chunk of the 100,000 floats would run into ctest's timeout.
TEST_P(ExchangeWaits, MissingPeerTimesOutNamingOperationAndStep) {
  Latch othersDone(2);
  const auto results = runThreads(
      3, makeOptions(1500ms, 32, comm::GlooEngine::kDirect, GetParam()),
      [&](comm::Communicator& c) {
        c.barrier("warm-up");
        if (c.rank() == 2) {
          othersDone.wait();  // never joins the allreduce below; leaves once the others failed
          return;
        }
        std::vector<float> big(kBucketFloats, 1.0f);
        try {
          c.allreduce(big, comm::ReduceOp::kSum, "epoch 0 step 5");
        } catch (...) {
          othersDone.arrive();
          throw;
        }
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(results[r].find("timeout"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("allreduce"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("epoch 0 step 5"), std::string::npos) << results[r];
    EXPECT_NE(results[r].find("timed out after 1500 ms"), std::string::npos) << results[r];
  }
  EXPECT_EQ(results[2], "ok");
}

// Three thread ranks allreduce 50 large buckets; rank 2 leaves after 2 (its communicator gone,
// its sockets closed). Step 2 starts after rank 2's sockets are closed: the first write to it then
// meets a closed connection, not one still closing. What each rank's body returned or threw.
std::vector<std::string> runWithRank2Leaving(const comm::GlooOptions& options) {
  Latch rank2Closed(1);
  return runThreads(
      3, options,
      [&](comm::Communicator& c) {
        std::vector<float> big(kBucketFloats, 1.0f);
        const int calls = c.rank() == 2 ? 2 : 50;
        for (int i = 0; i < calls; ++i) {
          if (i == 2 && !rank2Closed.wait()) throw std::runtime_error("rank 2 never left");
          std::fill(big.begin(), big.end(), 1.0f);
          c.allreduce(big, comm::ReduceOp::kSum, "step " + std::to_string(i));
          if (big[0] != 3.0f) throw std::runtime_error("wrong sum");
        }
      },
      [&](int rank) {
        if (rank == 2) rank2Closed.arrive();
      });
}

// A peer that leaves (its sockets closed, as when its process dies) fails the others' next large
// allreduce with a ProtocolError long before the deadline.
// (The deadline is 10 minutes: failing within ctest's timeout is failing "at once".)
TEST_P(ExchangeWaits, LeavingPeerFailsTheOthersAtOnce) {
  const auto results =
      runWithRank2Leaving(makeOptions(600s, 32, comm::GlooEngine::kDirect, GetParam()));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].rfind("peer: allreduce at step 2 failed", 0), 0u) << results[r];
  }
  EXPECT_EQ(results[2], "ok");
}

// Payloads larger than the kernel's socket buffers hold (64 MiB each way; sndbuf is capped by
// net.core.wmem_max, the receive window does not grow while nobody reads): the exchange's writes
// block until the peer reads, so two ranks that wrote to each other at once would both wait until
// the deadline (NOTE [Sync pairs]: the lower rank writes first). Exact results; the deadline is
// 10 minutes, past ctest's timeout, so waiting for it fails the test.
TEST_P(ExchangeWaits, PayloadsLargerThanSocketBuffersComplete) {
  const auto results = runThreads(
      2, makeOptions(600s, 32, comm::GlooEngine::kDirect, GetParam()), [](comm::Communicator& c) {
        std::vector<float> huge(16u << 20, static_cast<float>(c.rank() + 1));
        c.allreduce(huge, comm::ReduceOp::kSum, "huge");
        if (huge.front() != 3.0f || huge.back() != 3.0f) throw std::runtime_error("wrong sum");
      });
  for (const auto& r : results) EXPECT_EQ(r, "ok");
}

// A peer that leaves while this rank is blocked writing more than the kernel's socket buffers hold
// (32 MiB; the lower rank of a pair writes first): the blocked write fails at once with a
// ProtocolError (a reset), neither waiting for the deadline nor raising SIGPIPE (which would kill
// this whole test process).
// Whether rank 1 leaves before or during the write, the write fails the same way; the 10-minute
// deadline makes "at once" anything within ctest's timeout.
TEST_P(ExchangeWaits, PeerLeavingDuringALargeWriteFailsTheWriter) {
  const auto results = runThreads(
      2, makeOptions(600s, 32, comm::GlooEngine::kDirect, GetParam()), [](comm::Communicator& c) {
        c.barrier("warm-up");
        if (c.rank() == 1) {
          std::this_thread::sleep_for(500ms);  // most often leaves mid-write, without reading
          return;
        }
        std::vector<float> huge(8u << 20, 1.0f);
        c.allreduce(huge, comm::ReduceOp::kSum, "huge");
      });
  EXPECT_EQ(results[0].rfind("peer: allreduce at huge failed", 0), 0u) << results[0];
  EXPECT_EQ(results[1], "ok");
}

// setTimeout after connecting: the new deadline holds for the large allreduce (the synchronous
// pairs' sockets carry the connect timeout, so the exchange leaves them), and results stay exact.
TEST_P(ExchangeWaits, TimeoutSetAfterConnectHolds) {
  Latch othersDone(2);
  // Connected with 10 minutes, then 1 s: the error names the new deadline, and waiting for the
  // old one would run into ctest's timeout (300 s).
  const auto results = runThreads(
      3, makeOptions(600s, 32, comm::GlooEngine::kDirect, GetParam()), [&](comm::Communicator& c) {
        c.setTimeout(1000ms);
        std::vector<float> big(kBucketFloats, static_cast<float>(c.rank()));
        c.allreduce(big, comm::ReduceOp::kSum, "exact");
        if (big[kBucketFloats - 1] != 3.0f) throw std::runtime_error("wrong sum");
        if (c.rank() == 2) {
          othersDone.wait();  // never joins the allreduce below; leaves once the others failed
          return;
        }
        try {
          c.allreduce(big, comm::ReduceOp::kSum, "stalled");
        } catch (...) {
          othersDone.arrive();
          throw;
        }
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(results[r].find("timeout: allreduce at stalled timed out after 1000 ms"),
              std::string::npos)
        << results[r];
  }
  EXPECT_EQ(results[2], "ok");
}

INSTANTIATE_TEST_SUITE_P(EveryWait, ExchangeWaits,
                         ::testing::Values(comm::GlooWait::kSync, comm::GlooWait::kBusyPoll,
                                           comm::GlooWait::kLoopThread),
                         [](const ::testing::TestParamInfo<comm::GlooWait>& info) {
                           return waitName(info.param);
                         });

// Ranks that disagree on loop-thread or not: the one that wants synchronous pairs runs into its
// connect deadline (documented on GlooWait), the other connects; neither hangs. The rank that
// connected keeps its communicator until the other has given up: had it closed its sockets at
// once, the other would fail with "closed by peer" first (seen under load in a fresh-clone run).
// The direct engine above starCollectivesAbove runs its stars over its own sockets, without Gloo
// (NOTE [Star sockets]): starAbove 0 forces them at W = 3. A missing peer is a TimeoutError at
// rank 0 (or a ProtocolError at rank 1 once rank 0 gave up), naming the operation and the step.
TEST(StarSockets, MissingPeerTimesOutNamingOperationAndStep) {
  DDPH_REQUIRE_DIRECT_GLOO();
  const auto results = runWithRank2Missing(makeOptions(1500ms, 0, comm::GlooEngine::kDirect));
  EXPECT_EQ(results[0].rfind("timeout: allreduce at epoch 0 step 5 timed out", 0), 0u)
      << results[0];
  EXPECT_TRUE(results[1].rfind("timeout: ", 0) == 0 || results[1].rfind("peer: ", 0) == 0)
      << results[1];
  EXPECT_NE(results[1].find("epoch 0 step 5"), std::string::npos) << results[1];
  EXPECT_EQ(results[2], "ok");
}

// A rank that leaves (its sockets closed) fails the others' next collective with a ProtocolError,
// long before the 10-minute deadline.
TEST(StarSockets, LeavingPeerFailsTheOthersAtOnce) {
  DDPH_REQUIRE_DIRECT_GLOO();
  const auto results = runWithRank2Leaving(makeOptions(600s, 0, comm::GlooEngine::kDirect));
  EXPECT_EQ(results[0].rfind("peer: allreduce at step 2 failed", 0), 0u) << results[0];
  EXPECT_EQ(results[1].rfind("peer: allreduce at step 2 failed", 0), 0u) << results[1];
  EXPECT_EQ(results[2], "ok");
}

// A host name, as MASTER_ADDR often is, resolves as Gloo's device resolves it.
TEST(StarSockets, AHostNameResolves) {
  DDPH_REQUIRE_DIRECT_GLOO();
  comm::GlooOptions options = makeOptions(60s, 0, comm::GlooEngine::kDirect);
  options.hostname = "localhost";
  const auto results = runThreads(3, options, [](comm::Communicator& c) {
    std::vector<std::int64_t> v{c.rank()};
    c.allreduce(v, comm::ReduceOp::kSum, "step 0");
    if (v[0] != 3) throw std::runtime_error("wrong sum");
  });
  for (const auto& r : results) EXPECT_EQ(r, "ok");
}

// Ranks that call different collectives (here payloads of different lengths) fail with a
// ProtocolError naming what arrived, not with each other's bytes.
TEST(StarSockets, RanksCallingDifferentCollectivesFail) {
  DDPH_REQUIRE_DIRECT_GLOO();
  const auto results =
      runThreads(3, makeOptions(600s, 0, comm::GlooEngine::kDirect), [](comm::Communicator& c) {
        std::vector<float> f(c.rank() == 1 ? 3 : 2, 1.0f);
        c.allreduce(f, comm::ReduceOp::kSum, "step 0");
      });
  EXPECT_NE(results[0].find("the ranks called different collectives"), std::string::npos)
      << results[0];
  for (const auto& r : results) EXPECT_EQ(r.rfind("peer: allreduce at step 0 failed", 0), 0u) << r;
}

TEST(GlooCommunicator, RanksThatDisagreeOnSyncPairsFailTheConnect) {
  DDPH_REQUIRE_DIRECT_GLOO();
  auto store = comm::makeInProcessStore();
  struct Outcome {
    std::string what;
    std::unique_ptr<comm::Communicator> comm;  // held by the test until both ranks are done
  };
  auto connect = [store](int rank, comm::GlooWait wait) {
    Outcome o;
    try {
      o.comm = comm::connectGloo(store, rank, 2,
                                 makeOptions(1000ms, 32, comm::GlooEngine::kDirect, wait));
      o.what = "ok";
    } catch (const TimeoutError& e) {
      o.what = std::string("timeout: ") + e.what();
    }
    return o;
  };
  auto loopThread = std::async(std::launch::async, connect, 0, comm::GlooWait::kLoopThread);
  auto sync = std::async(std::launch::async, connect, 1, comm::GlooWait::kSync);
  const Outcome syncOutcome = sync.get();
  const Outcome loopOutcome = loopThread.get();
  EXPECT_EQ(loopOutcome.what, "ok");
  EXPECT_EQ(syncOutcome.what.rfind("timeout: ", 0), 0u) << syncOutcome.what;
}

TEST(GlooCommunicator, TheEnvironmentChoosesEngineAndWaitAtTheEdge) {
  ::setenv("DDPH_GLOO_ENGINE", "process-group", 1);
  ::setenv("DDPH_GLOO_WAIT", "loop-thread", 1);
  const comm::GlooOptions options = comm::glooOptionsFromEnvironment();
  EXPECT_EQ(options.engine, comm::GlooEngine::kProcessGroup);
  EXPECT_EQ(options.wait, comm::GlooWait::kLoopThread);
  ::setenv("DDPH_GLOO_WAIT", "spin", 1);
  EXPECT_THROW(comm::glooOptionsFromEnvironment(), ConfigError);
  ::setenv("DDPH_GLOO_ENGINE", "mpi", 1);
  ::unsetenv("DDPH_GLOO_WAIT");
  EXPECT_THROW(comm::glooOptionsFromEnvironment(), ConfigError);
  ::unsetenv("DDPH_GLOO_ENGINE");
  // The libraries never read it: connectGloo takes the option as given.
  EXPECT_EQ(comm::glooOptionsFromEnvironment().engine, comm::GlooEngine::kDirect);
}

TEST(GlooCommunicator, StoreWaitHasADeadline) {
  auto store = comm::makeInProcessStore();
  try {
    store->get("never-set", 200ms, "rendezvous");
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never-set"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddph::comm
