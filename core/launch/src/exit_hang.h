#pragma once
// Private to ddph::launch: how the rank supervisor tells a rank that hung at exit, after its work,
// from one still working (supervisor.h, SupervisorOptions::workDone).
//
// NOTE [Hung at exit]: a rank whose trace says its work is done (its `end` line, or its DDP
// modules freed after destroy_process_group) but whose process does not end, while every other
// rank exited 0 or is in the same state, is hung at exit once its process has used at most 1 % of
// a core over the settle time: in torch 1.13's gloo teardown deadlock (pytorch/pytorch#75097)
// every thread waits on a lock but gloo's event loop, which wakes every 10 ms (about 0.2 % of a
// core, measured). Such ranks are ended as a world's stop ends ranks and named "hung at exit";
// plain torchrun would wait for them for ever. A rank that still computes (a report written after
// the last collective) uses CPU and is left alone. docs/ddp-sim.md, "A rank that hangs at exit".
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

namespace ddph::launch {

/// The CPU time (user + system, in clock ticks) that process `pid` has used, from
/// /proc/PID/stat; nothing when it cannot be read (the process is gone).
std::optional<std::uint64_t> cpuTicks(pid_t pid);
long clockTicksPerSecond();

class ExitHangWatch {
 public:
  using Clock = std::chrono::steady_clock;
  using CpuReader = std::function<std::optional<std::uint64_t>(pid_t)>;

  /// `ticksPerSecond`: the clock ticks cpuTicks counts in (sysconf(_SC_CLK_TCK)).
  explicit ExitHangWatch(std::chrono::milliseconds settle, CpuReader cpu = cpuTicks,
                         long ticksPerSecond = clockTicksPerSecond())
      : settle_(settle), cpu_(std::move(cpu)), ticksPerSecond_(ticksPerSecond) {}

  /// Whether process `pid` used at most 1 % of a core over a settle time that ended at `now`. The
  /// first call for a pid opens its window; a call once the window is as long as the settle time
  /// judges it and, when the process was busier, opens the next one.
  bool idle(pid_t pid, Clock::time_point now);
  /// Forgets every process: the world is not in that state any more (a rank is working).
  void reset() { seen_.clear(); }

 private:
  struct Window {
    std::uint64_t ticks = 0;
    Clock::time_point since;
  };
  std::chrono::milliseconds settle_;
  CpuReader cpu_;
  long ticksPerSecond_;
  std::map<pid_t, Window> seen_;
};

}  // namespace ddph::launch
