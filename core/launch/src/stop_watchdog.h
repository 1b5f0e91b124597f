#pragma once
// Private to ddph::launch: the watchdog that keeps the rank supervisor's deadline and Ctrl-C when
// its own thread cannot (NOTE [Stuck output] in supervisor.cpp, docs/design-notes.md "The
// launcher's output").
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace ddph::common {
class StopSignalScope;  // ddph/common/stop_signals.h
}  // namespace ddph::common

namespace ddph::launch {

/// A thread that calls `fire` once, from itself, when `deadline` (if any) plus `grace` passes, or
/// `grace` after a stop signal came to `signals`, unless stop() came first.
/// Destruction stops and joins it.
class StopWatchdog {
 public:
  /// Why it fired: kDeadline, or the stop signal's number.
  static constexpr int kDeadline = -1;

  StopWatchdog(const common::StopSignalScope& signals,
               std::optional<std::chrono::steady_clock::time_point> deadline,
               std::chrono::milliseconds grace, std::function<void(int why)> fire);
  ~StopWatchdog();
  StopWatchdog(const StopWatchdog&) = delete;
  StopWatchdog& operator=(const StopWatchdog&) = delete;

  void stop();
  /// 0 until it fired, then why.
  int fired() const { return fired_.load(); }

 private:
  void watch(const common::StopSignalScope& signals,
             std::optional<std::chrono::steady_clock::time_point> deadline,
             std::chrono::milliseconds grace, const std::function<void(int)>& fire);

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::atomic<int> fired_{0};
  std::thread thread_;
};

}  // namespace ddph::launch
