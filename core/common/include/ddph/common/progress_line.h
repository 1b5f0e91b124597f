#pragma once
// One line of progress on a terminal ("ddp-sim run healthy: 3 of 4 ranks joined, 1 of 2 epochs
// done, 0:12"), redrawn in place with '\r' from a thread of its own a few times a second, and
// cleared at the end. When the file descriptor is not a terminal (a log, a pipe, CI) it draws
// nothing at all and starts no thread, so the output is exactly what it would be without it.
//
// The status function runs on the drawing thread: it must only read what is safe to read there
// (atomics, shared memory, files). Drawing uses write(2), never stdio, so a process that forks
// while the line is drawn (ddp-sim run's ranks) inherits no held stdio lock.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ddph::common {

class ProgressLine {
 public:
  using Status = std::function<std::string()>;
  static constexpr std::chrono::milliseconds kInterval{250};

  /// When `fd` is a terminal: draws status() now, then every `interval` until stop().
  ProgressLine(int fd, Status status, std::chrono::milliseconds interval = kInterval);
  ~ProgressLine();  ///< stop()
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// Whether the line is drawn (the fd is a terminal and stop() was not called).
  bool active() const { return thread_.joinable(); }

  /// Runs `write`, which prints whole lines to the same terminal, with the line cleared first and
  /// drawn again after it, so the two never share a row. Runs `write` alone when inactive.
  void printAbove(const std::function<void()>& write);

  /// Stops drawing and clears the line; idempotent.
  void stop();

  /// Elapsed time as "0:07", "12:34" or "1:02:03".
  static std::string formatElapsed(std::chrono::steady_clock::duration elapsed);

 private:
  void draw();   // with mutex_ held
  void clear();  // with mutex_ held
  void run();

  int fd_;
  Status status_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool drawn_ = false;
  std::thread thread_;
};

}  // namespace ddph::common
