#pragma once
// Private to ddph::launch: how the rank supervisor tells a rank that hung at exit, after its work,
// from one still working (supervisor.h, SupervisorOptions::workDone).
//
// NOTE [Hung at exit]: a rank whose trace says its work is done (its `end` line, or its DDP
// modules freed after destroy_process_group) but whose process does not end, while every other
// rank exited 0 or is in the same state, is hung at exit once its main thread has waited in one
// futex wait (a lock, a join) for the whole settle time: torch 1.13's gloo teardown deadlock
// (pytorch/pytorch#75097) is the main thread joining a gloo worker that waits for the GIL the
// main thread holds. Not its CPU time: there a store thread whose peer has gone spins at 100 %
// of a core (measured). Such ranks are ended as a world's stop ends ranks and named "hung at
// exit"; plain torchrun would wait for them for ever. A rank that still computes, sleeps or
// reads after its work is not in one futex wait and is left alone. docs/ddp-sim.md, "A rank that
// hangs at exit".
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

namespace ddph::launch {

/// The address process `pid`'s main thread waits on when it is blocked in a futex wait, from
/// /proc/PID/syscall; nothing when it runs, is in another system call, or that file cannot be
/// read (the process is gone, or not this user's to inspect).
std::optional<std::uint64_t> mainThreadFutex(pid_t pid);

class ExitHangWatch {
 public:
  using Clock = std::chrono::steady_clock;
  using WaitReader = std::function<std::optional<std::uint64_t>(pid_t)>;

  explicit ExitHangWatch(std::chrono::milliseconds settle, WaitReader wait = mainThreadFutex)
      : settle_(settle), wait_(std::move(wait)) {}

  /// Whether process `pid`'s main thread has waited on one futex at every call over the settle
  /// time up to `now`. A call that sees it elsewhere (or on another futex) starts the count anew.
  bool hung(pid_t pid, Clock::time_point now);
  /// Forgets every process: the world is not in that state any more (a rank is working).
  void reset() { seen_.clear(); }

 private:
  struct Wait {
    std::uint64_t futex = 0;
    Clock::time_point since;
  };
  std::chrono::milliseconds settle_;
  WaitReader wait_;
  std::map<pid_t, Wait> seen_;
};

}  // namespace ddph::launch
