// The one rank supervisor (core/launch/src/supervisor.h) applies one stop rule whatever started the
// ranks: the same world, forked from this process (makeForkedSpawner) and exec'd (makeExecSpawner),
// ends the same way.
#include "supervisor.h"

#include "exit_hang.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <sstream>

#include "ddph/common/private_folder.h"
#include "ddph/launch/rank_spawner.h"

using namespace std::chrono_literals;

namespace ddph::launch {

using common::PrivateFolder;

namespace {

enum class Way { kForked, kExecd };

// Rank 1 fails (exit 10) once rank 0 says it is ready; rank 0 turns the stop's SIGTERM into a
// SIGKILL of its own (a rank that dies on its own while the world is being stopped); rank 2 waits
// to be stopped. The order comes from `ready` (a FIFO) and the stop itself; each wait lasts at most
// 10 minutes, the grace is longer than the test.
std::unique_ptr<RankSpawner> threeRanks(Way way, const std::string& ready) {
  if (way == Way::kExecd) {
    const std::string script =
        "case $RANK in\n"
        "0) trap 'kill -KILL $$' TERM; echo ready > \"$READY\"; sleep 600 & wait; exit 4;;\n"
        "1) read line < \"$READY\" && exit 10; exit 3;;\n"
        "*) exec sleep 600;;\n"
        "esac\n";
    return makeExecSpawner({"/bin/sh", "-c", script}, {{"READY", ready}});
  }
  return makeForkedSpawner([ready](int rank, int) {
    if (rank == 1) {
      char line[16];
      const int fd = ::open(ready.c_str(), O_RDONLY);
      return fd >= 0 && ::read(fd, line, sizeof(line)) > 0 ? 10 : 3;
    }
    if (rank == 0) {
      sigset_t term;
      sigemptyset(&term);
      sigaddset(&term, SIGTERM);
      ::sigprocmask(SIG_BLOCK, &term, nullptr);
      const int fd = ::open(ready.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, "ready\n", 6) != 6) return 3;
      const timespec deadline{600, 0};
      if (::sigtimedwait(&term, nullptr, &deadline) != SIGTERM) return 3;
      ::raise(SIGKILL);
      return 4;
    }
    const timespec wait{600, 0};
    ::nanosleep(&wait, nullptr);  // ended by the supervisor's SIGTERM
    return 4;
  });
}

class OneStopRule : public ::testing::TestWithParam<Way> {};

TEST_P(OneStopRule, TheFirstFailureStopsTheRestAndADeathOfItsOwnIsNamedAsSuch) {
  PrivateFolder dir("ddph-supervisor-");
  const std::string ready = dir.path() + "/ready";
  ASSERT_EQ(::mkfifo(ready.c_str(), 0600), 0);
  std::ostringstream out, err;
  SupervisorOptions options;
  options.worldSize = 3;
  options.timeout = 20min;
  options.grace = 10min;
  options.rankEnvironment = [](int r) { return EnvMap{{"RANK", std::to_string(r)}}; };
  options.out = &out;
  options.err = &err;
  Supervisor supervisor(options);
  const auto spawner = threeRanks(GetParam(), ready);
  const SupervisedWorld world = supervisor.run(*spawner);

  ASSERT_EQ(world.ranks.size(), 3u);
  EXPECT_EQ(world.stopCause, StopCause::kFailure);
  EXPECT_EQ(world.firstFailure, 1);
  EXPECT_EQ(world.interruptedBy, 0);
  const SupervisedRank& own = world.ranks[0];
  ASSERT_TRUE(own.end);
  EXPECT_EQ(own.end->signal, SIGKILL);
  EXPECT_TRUE(own.runningAtStop);
  EXPECT_FALSE(own.endedByStop) << "its own SIGKILL, not the supervisor's";
  EXPECT_FALSE(own.stoppedByUs());
  const SupervisedRank& failed = world.ranks[1];
  ASSERT_TRUE(failed.end);
  EXPECT_EQ(failed.end->code, 10);
  EXPECT_FALSE(failed.stoppedByUs());
  const SupervisedRank& stopped = world.ranks[2];
  ASSERT_TRUE(stopped.end);
  EXPECT_EQ(stopped.end->signal, SIGTERM);
  EXPECT_TRUE(stopped.endedByStop);
  EXPECT_TRUE(stopped.stoppedByUs());
  for (const auto& rank : world.ranks) EXPECT_GT(rank.pid, 0);
  EXPECT_EQ(out.str() + err.str(), "") << "no rank wrote a line";
}

INSTANTIATE_TEST_SUITE_P(Supervisor, OneStopRule, ::testing::Values(Way::kForked, Way::kExecd),
                         [](const ::testing::TestParamInfo<Way>& info) {
                           return info.param == Way::kForked ? std::string("Forked")
                                                             : std::string("Execd");
                         });

// NOTE [Hung at exit]: rank 0 exits 0; rank 1, whose work `workDone` says is done, either waits
// for ever on a condition nobody signals (its main thread in one futex wait: hung at exit, ended)
// or computes for 3 s of CPU time and exits 0 (still working: left alone, though it outlives the
// 1 s settle time). What its main thread does, not the clock, tells them apart.
SupervisedWorld rankOneAfterItsWork(bool computes) {
  SupervisorOptions options;
  options.worldSize = 2;
  options.timeout = 20min;
  options.grace = 10min;
  options.exitSettle = 1s;
  options.workDone = [](int rank, pid_t) { return rank == 1; };
  Supervisor supervisor(options);
  const auto spawner = makeForkedSpawner([computes](int rank, int) {
    if (rank == 0) return 0;
    if (computes) {
      timespec used{};
      volatile std::uint64_t sum = 0;
      do {
        for (int i = 0; i < 100000; ++i) sum = sum + static_cast<std::uint64_t>(i);
        ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
      } while (used.tv_sec < 3);
      return 0;
    }
    std::mutex m;
    std::condition_variable never;
    std::unique_lock<std::mutex> lock(m);
    never.wait(lock, [] { return false; });  // ended by the supervisor
    return 4;
  });
  return supervisor.run(*spawner);
}

TEST(ExitHang, ARankAfterItsWorkBlockedInOneWaitIsEndedAsHungAtExit) {
  const SupervisedWorld world = rankOneAfterItsWork(/*computes=*/false);
  ASSERT_EQ(world.ranks.size(), 2u);
  EXPECT_EQ(world.stopCause, StopCause::kHungAtExit);
  EXPECT_FALSE(world.firstFailure);
  ASSERT_TRUE(world.ranks[0].end);
  EXPECT_EQ(world.ranks[0].end->code, 0);
  EXPECT_FALSE(world.ranks[0].hungAtExit);
  const SupervisedRank& hung = world.ranks[1];
  ASSERT_TRUE(hung.end);
  EXPECT_TRUE(hung.hungAtExit);
  EXPECT_EQ(hung.end->signal, SIGTERM);
  EXPECT_TRUE(hung.endedByStop);
}

TEST(ExitHang, ARankAfterItsWorkThatStillComputesIsLeftToEnd) {
  const SupervisedWorld world = rankOneAfterItsWork(/*computes=*/true);
  ASSERT_EQ(world.ranks.size(), 2u);
  EXPECT_EQ(world.stopCause, StopCause::kNone);
  for (const auto& rank : world.ranks) {
    ASSERT_TRUE(rank.end);
    EXPECT_EQ(rank.end->code, 0);
    EXPECT_EQ(rank.end->signal, 0);
    EXPECT_FALSE(rank.hungAtExit);
  }
}

TEST(ExitHang, OneFutexWaitOverTheSettleTimeIsHung) {
  std::optional<std::uint64_t> futex = 0x7000;
  ExitHangWatch watch(std::chrono::milliseconds(10000), [&futex](pid_t) { return futex; });
  const auto t0 = ExitHangWatch::Clock::now();
  EXPECT_FALSE(watch.hung(42, t0));  // the count starts
  EXPECT_FALSE(watch.hung(42, t0 + 9s));
  futex = 0x7100;  // another wait: it went on between the two looks
  EXPECT_FALSE(watch.hung(42, t0 + 10s));
  EXPECT_FALSE(watch.hung(42, t0 + 19s));
  EXPECT_TRUE(watch.hung(42, t0 + 20s));
  futex.reset();  // running, or in another system call
  EXPECT_FALSE(watch.hung(42, t0 + 21s));
  futex = 0x7100;
  EXPECT_FALSE(watch.hung(42, t0 + 22s));
  EXPECT_FALSE(watch.hung(42, t0 + 31s));
  EXPECT_TRUE(watch.hung(42, t0 + 32s));
  watch.reset();
  EXPECT_FALSE(watch.hung(42, t0 + 33s));
}

TEST(ExitHang, TheMainThreadsFutexIsReadFromProc) {
  EXPECT_FALSE(mainThreadFutex(::getpid())) << "this thread runs: it reads the file";
  EXPECT_FALSE(mainThreadFutex(0));
}

}  // namespace
}  // namespace ddph::launch
