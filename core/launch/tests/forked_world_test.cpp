// runForkedWorld (core/launch/src/forked_world/: the forked spawner under the one rank supervisor)
// on real forked ranks: which ranks it stopped and which ended on their own, when deaths overlap.
#include "ddph/launch/forked_world.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

using namespace std::chrono_literals;

namespace ddph::launch {
namespace {

// Blocks SIGTERM, says so on `ready`, and waits (at most 10 minutes) until SIGTERM is pending: the
// supervisor has begun to stop the world.
bool waitForTheStop(int ready) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &term, nullptr);
  if (::write(ready, "r", 1) != 1) return false;
  const timespec deadline{600, 0};
  return ::sigtimedwait(&term, nullptr, &deadline) == SIGTERM;
}

// Whether `fd` has a byte to read within 10 minutes.
bool readyWithin10Minutes(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 600000) == 1;
}

// Found by the soak (scripts/soak.sh, W = 61): rank 0 killed by its fault, and a peer that saw its
// sockets close reaped first; the stop that peer started marked rank 0, still being torn down, as
// stopped by the supervisor, and the report blamed the peer. Ordered here by the stop itself: rank
// 1 fails at once, rank 0 dies of its own SIGKILL only once the supervisor's SIGTERM has come, and
// rank 2 waits to be stopped. The grace before the supervisor's SIGKILL is longer than the test.
TEST(ForkedWorld, ARankThatKillsItselfWhileTheWorldStopsDiedOnItsOwn) {
  ForkedWorldOptions options;
  options.worldSize = 3;
  options.grace = 10min;
  options.deadline = 20min;
  int ready[2];  // rank 0 -> rank 1: SIGTERM is blocked
  ASSERT_EQ(::pipe(ready), 0);
  const ForkedWorldResult result = runForkedWorld(options, [&ready](int rank, int) {
    if (rank == 1) {
      // Fails once rank 0 has blocked SIGTERM: a stop before that would end rank 0 by the
      // supervisor's SIGTERM (held pending across its fork, forked_world_spawner.cpp), not its
      // own SIGKILL.
      return readyWithin10Minutes(ready[0]) ? 10 : 3;
    }
    if (rank == 0) {
      if (!waitForTheStop(ready[1])) return 3;
      ::raise(SIGKILL);
      return 3;
    }
    const timespec wait{600, 0};
    ::nanosleep(&wait, nullptr);  // ended by the supervisor's SIGTERM
    return 4;
  });
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(result.ranks.size(), 3u);
  EXPECT_EQ(result.ranks[0].signal, SIGKILL);
  EXPECT_FALSE(result.ranks[0].stoppedByUs) << "its own SIGKILL, not the supervisor's";
  EXPECT_EQ(result.ranks[1].exitCode, 10);
  EXPECT_FALSE(result.ranks[1].stoppedByUs);
  EXPECT_EQ(result.ranks[2].signal, SIGTERM);
  EXPECT_TRUE(result.ranks[2].stoppedByUs);
  EXPECT_EQ(result.firstFailure, 1);
}

}  // namespace
}  // namespace ddph::launch
