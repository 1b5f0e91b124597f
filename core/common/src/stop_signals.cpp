#include "ddph/common/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "ddph/common/error.h"

namespace ddph::common {
namespace {

std::atomic<int> gReceived{0};
std::atomic<bool> gActive{false};
int gPipe[2] = {-1, -1};
struct sigaction gPreviousInt {};
struct sigaction gPreviousTerm {};

extern "C" void recordStopSignal(int signal) {
  const int saved = errno;
  gReceived.store(signal);
  const char byte = 1;
  // Non-blocking: a full pipe already says "a signal arrived".
  [[maybe_unused]] const ssize_t n = ::write(gPipe[1], &byte, 1);
  errno = saved;
}

void closePipe() {
  for (int& fd : gPipe) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

}  // namespace

StopSignalScope::StopSignalScope() {
  bool expected = false;
  if (!gActive.compare_exchange_strong(expected, true)) {
    throw Error("a StopSignalScope is already active in this process");
  }
  if (::pipe2(gPipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    gActive.store(false);
    throw Error(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  gReceived.store(0);
  struct sigaction action {};
  action.sa_handler = recordStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, &gPreviousInt);
  ::sigaction(SIGTERM, &action, &gPreviousTerm);
}

StopSignalScope::~StopSignalScope() {
  ::sigaction(SIGINT, &gPreviousInt, nullptr);
  ::sigaction(SIGTERM, &gPreviousTerm, nullptr);
  closePipe();
  gActive.store(false);
}

int StopSignalScope::received() const { return gReceived.load(); }

int StopSignalScope::fd() const { return gPipe[0]; }

void restoreDefaultStopSignals() {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  closePipe();
  gActive.store(false);
}

}  // namespace ddph::common
