#include "stop_watchdog.h"

#include <poll.h>

#include "ddph/common/stop_signals.h"

namespace ddph::launch {

using common::StopSignalScope;

StopWatchdog::StopWatchdog(const StopSignalScope& signals,
                           std::optional<std::chrono::steady_clock::time_point> deadline,
                           std::chrono::milliseconds grace, std::function<void(int why)> fire)
    : thread_([this, &signals, deadline, grace, fire = std::move(fire)] {
        watch(signals, deadline, grace, fire);
      }) {}

StopWatchdog::~StopWatchdog() {
  stop();
  thread_.join();
}

void StopWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  wake_.notify_all();
}

void StopWatchdog::watch(const StopSignalScope& signals,
                         std::optional<std::chrono::steady_clock::time_point> deadline,
                         std::chrono::milliseconds grace, const std::function<void(int)>& fire) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> at;
  int why = 0;
  if (deadline) {
    at = *deadline + grace;
    why = kDeadline;
  }
  bool signalSeen = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopped_) {
    if (!signalSeen) {
      pollfd p{signals.fd(), POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) {
        signalSeen = true;
        const auto signalAt = Clock::now() + grace;
        if (!at || signalAt < *at) {
          at = signalAt;
          why = signals.received();
        }
      }
    }
    if (at && Clock::now() >= *at) {
      fired_ = why;
      lock.unlock();
      fire(why);
      return;
    }
    // Wakes for stop() at once; looks at the signal pipe every 100 ms.
    auto until = Clock::now() + std::chrono::milliseconds(100);
    if (at && *at < until) until = *at;
    wake_.wait_until(lock, until);
  }
}

}  // namespace ddph::launch
