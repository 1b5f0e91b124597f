#pragma once
// Private to ddph::launch: the rule by which a world of ranks is stopped, applied by the one rank
// supervisor (supervisor.h) to every world, whatever started its ranks.
//
// NOTE [Stopping a world]: on the first failure, the deadline or a stop signal, the ranks' group
// gets SIGTERM, then SIGCONT (a rank stopped by SIGSTOP or a debugger acts on the SIGTERM now, not
// at the SIGKILL), then SIGKILL once the grace has run out. A rank that ends of a SIGTERM, or of a
// SIGKILL after the grace, was ended by the stop; one that ends of anything else while the world
// is being stopped (its own SIGKILL, an OOM kill) died on its own and is named as such.
// docs/design-notes.md, "Processes: one child type, one signal scope".
#include <sys/types.h>

#include <chrono>

namespace ddph::launch {

class WorldStop {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorldStop(std::chrono::milliseconds grace) : grace_(grace) {}

  /// SIGTERM and SIGCONT to `group` (0: nothing started yet); the grace starts. Once only:
  /// false when the world was being stopped already.
  bool begin(pid_t group);
  bool stopping() const { return stopping_; }
  /// When the grace runs out (valid once stopping()).
  Clock::time_point killAt() const { return killAt_; }
  /// SIGKILL to `group` now, once (a grace timer that fired at killAt()); true when sent now.
  bool kill(pid_t group);
  /// The grace ran out and SIGKILL went to the group (here, or from a watchdog's thread).
  void markKilled() { killSent_ = true; }
  bool killSent() const { return killSent_; }
  /// Whether a rank that ended of `signal` was ended by this stop.
  bool endedByStop(int signal) const;

 private:
  std::chrono::milliseconds grace_;
  bool stopping_ = false;
  bool killSent_ = false;
  Clock::time_point killAt_{};
};

/// Whether `pid` is in the stop state (T: SIGSTOP, a debugger, a frozen job), from /proc/PID/stat:
/// read before the stop's SIGCONT, it tells a stopped rank from a hung one.
bool inStopState(pid_t pid);

}  // namespace ddph::launch
