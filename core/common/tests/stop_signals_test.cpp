// ddph::common::StopSignalScope, the one signal scope of the forked world, the trainer and the
// launcher: real signals raised at this process.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>

#include <atomic>

#include "ddph/common/error.h"
#include "ddph/common/stop_signals.h"

namespace {

std::atomic<int> gOutside{0};
extern "C" void outsideHandler(int signal) { gOutside.store(signal); }

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(StopSignalScope, RecordsTheSignalAndWakesItsDescriptor) {
  ddph::common::StopSignalScope scope;
  EXPECT_EQ(scope.received(), 0);
  EXPECT_FALSE(readable(scope.fd()));
  ASSERT_EQ(::raise(SIGTERM), 0);  // delivered before raise returns (one thread)
  EXPECT_EQ(scope.received(), SIGTERM);
  EXPECT_TRUE(readable(scope.fd()));
  ASSERT_EQ(::raise(SIGINT), 0);
  EXPECT_EQ(scope.received(), SIGINT);  // the last one
}

TEST(StopSignalScope, PutsBackTheHandlersItFound) {
  struct sigaction mine {};
  mine.sa_handler = outsideHandler;
  sigemptyset(&mine.sa_mask);
  struct sigaction oldInt {}, oldTerm {};
  ASSERT_EQ(::sigaction(SIGINT, &mine, &oldInt), 0);
  ASSERT_EQ(::sigaction(SIGTERM, &mine, &oldTerm), 0);
  {
    ddph::common::StopSignalScope scope;
    ASSERT_EQ(::raise(SIGINT), 0);
    EXPECT_EQ(scope.received(), SIGINT);
    EXPECT_EQ(gOutside.load(), 0);  // the scope's handler ran, not ours
  }
  ASSERT_EQ(::raise(SIGTERM), 0);
  EXPECT_EQ(gOutside.load(), SIGTERM);  // ours is back
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
}

TEST(StopSignalScope, OneAtATimeAndANewOneStartsClean) {
  {
    ddph::common::StopSignalScope first;
    EXPECT_THROW(ddph::common::StopSignalScope second, ddph::common::Error);
    ASSERT_EQ(::raise(SIGINT), 0);
    EXPECT_EQ(first.received(), SIGINT);
  }
  ddph::common::StopSignalScope again;
  EXPECT_EQ(again.received(), 0);
  EXPECT_FALSE(readable(again.fd()));
}

}  // namespace
