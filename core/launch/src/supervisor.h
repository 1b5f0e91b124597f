#pragma once
// Private to ddph::launch: the one rank supervisor, written against RankSpawner / RankProcess
// (ddph/launch/rank_spawner.h) whatever starts the ranks. It starts a world's ranks, forwards
// their stdout / stderr lines with a "[rankN]: " prefix, collects what each writes to its result
// pipe, reaps them, and stops the world by one rule (NOTE [Stopping a world], world_stop.h) at the
// first failure, at the deadline or on SIGINT/SIGTERM. launchRanks (launcher.cpp) and
// runForkedWorld (forked_world/forked_world.cpp) are thin adapters over it.
// docs/design-notes.md, "Processes: one child type, one signal scope".
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddph/common/child_process.h"
#include "ddph/launch/rank_spawner.h"

namespace ddph::common {
class StopSignalScope;  // ddph/common/stop_signals.h
}  // namespace ddph::common

namespace ddph::launch {

struct SupervisorOptions {
  int worldSize = 1;
  /// Wall-clock limit for the world from the Supervisor's construction (none: no limit).
  std::optional<std::chrono::milliseconds> timeout;
  /// Between SIGTERM and SIGKILL when stopping the world.
  std::chrono::milliseconds grace{3000};
  /// Rank r's own variables, on top of the spawner's common environment (none when empty).
  std::function<EnvMap(int rank)> rankEnvironment;
  /// Where the ranks' stdout / stderr lines go, prefixed "[rankN]: " (null: read and dropped).
  /// Only ranks whose RankProcess has those pipes have lines.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  /// Sees every line before it is forwarded (the launcher looks for a taken MASTER_PORT).
  std::function<void(const std::string& line)> onLine;
  /// Kept equal to the ranks started and not yet reaped, for another thread to read (a progress
  /// line); null: not kept.
  std::atomic<int>* running = nullptr;
  /// Whether rank r (process pid), still running, has done its work (its trace says so:
  /// `ddp-sim launch --audit`). Once every rank exited 0 or has done its work, those whose main
  /// thread waited in one futex wait for `exitSettle` are hung at exit and ended (NOTE [Hung at
  /// exit], exit_hang.h). Null: never asked.
  std::function<bool(int rank, pid_t pid)> workDone;
  std::chrono::milliseconds exitSettle{10000};
};

/// Why the world was stopped.
enum class StopCause { kNone, kFailure, kDeadline, kInterrupt, kHungAtExit };

/// One rank of a supervised world, once the supervisor returned.
struct SupervisedRank {
  int rank = 0;
  pid_t pid = 0;                  ///< 0: never started (the world was stopped first)
  std::optional<common::ExitStatus> end;  ///< how it ended; nothing when it never started
  double endSeconds = 0;          ///< when it was reaped, since the Supervisor's construction
  double peakRssMb = 0;           ///< RankProcess::peakRssMb
  bool runningAtStop = false;     ///< not reaped yet when the stop began
  bool endedByStop = false;       ///< of the stop's SIGTERM, or of its SIGKILL after the grace
  bool wasStopped = false;        ///< in the stop state (T) when the stop began
  bool hungAtExit = false;        ///< ended as hung at exit after its work (NOTE [Hung at exit])
  std::string results;            ///< everything it wrote to its result pipe

  bool failed() const { return end && (end->signal != 0 || end->code != 0); }
  /// It ended because the supervisor stopped the world, not on its own (NOTE [Stopping a world]).
  bool stoppedByUs() const { return runningAtStop && (!end || end->signal == 0 || endedByStop); }
};

struct SupervisedWorld {
  std::vector<SupervisedRank> ranks;       ///< every rank of the world, in rank order
  StopCause stopCause = StopCause::kNone;  ///< what began the stop, if one did
  /// The first rank reaped that failed on its own (not stoppedByUs): the one that stopped the
  /// world when stopCause is kFailure.
  std::optional<int> firstFailure;
  int interruptedBy = 0;  ///< the SIGINT or SIGTERM that came, if one did
  double spawnSeconds = 0;
  double allReapedSeconds = 0;
  /// How many ranks were started (fewer than the world when a stop signal came while starting).
  int started() const;
};

/// One world's supervision, on this thread (Boost.Asio) plus a watchdog thread started after the
/// last rank (NOTE [Stuck output]). SIGINT and SIGTERM are recorded, not acted on, while it lives
/// (a StopSignalScope): one Supervisor at a time per process.
class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// The stop signals' scope: a spawner that waits before the ranks start (a fork server
  /// importing torch) watches its fd.
  const common::StopSignalScope& stopSignals() const;
  /// When the world's timeout runs out, if it has one.
  std::optional<std::chrono::steady_clock::time_point> deadline() const;

  /// Starts the world's ranks through `spawner` (stopping early on a stop signal) and supervises
  /// them until every one was reaped and its pipes were read to the end (or, held open by what a
  /// rank started, for 2 s more). Every rank is gone and every pipe closed when it returns, or
  /// throws: ConfigError naming the rank when a rank cannot be started. Once only.
  SupervisedWorld run(RankSpawner& spawner);

 private:
  class World;
  std::unique_ptr<World> world_;
};

}  // namespace ddph::launch
