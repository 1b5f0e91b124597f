#pragma once
// A torchrun-style launcher for CPU ranks: W processes of one command, the env:// variables, each
// output line prefixed with its rank, and fail-fast supervision.
//
// Supervision rules (as torchrun's, plus deadlines):
//  - a rank that exits non-zero, dies on a signal or outlives the timeout stops the world: every
//    other rank gets SIGTERM, then SIGKILL after `grace`; the first failure is reported;
//  - SIGINT/SIGTERM to the launcher stops every rank the same way;
//  - ranks live in their own process group (killed as a whole, so their children go too) and get
//    PR_SET_PDEATHSIG=SIGKILL, so even a SIGKILLed launcher leaves no orphan;
//  - every exit path kills and reaps: launchRanks returns only when no rank process is left.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddph/launch/master_port.h"
#include "ddph/launch/nodes.h"

namespace ddph::launch {

struct LaunchOptions {
  /// The world size W (with `nodes`: nodes x ranks per node).
  int numRanks = 1;
  /// Emulated nodes (ddp-sim launch --nnodes, docs/multi-node.md): each rank gets its node's
  /// torchrun (and, with slurm, SLURM) variables, its node's address and host name; MASTER_ADDR is
  /// node 0's address. None: the single-node form (every rank LOCAL_RANK = RANK).
  std::optional<NodeLayout> nodes;
  /// Program and arguments; the program is looked up on PATH when it has no '/'.
  std::vector<std::string> command;
  /// Wall-clock limit for the whole world (none: wait forever, like torchrun).
  std::optional<std::chrono::milliseconds> timeout;
  /// Between SIGTERM and SIGKILL when stopping ranks.
  std::chrono::milliseconds grace{3000};
  /// Where rank 0's store listens (MASTER_ADDR); with `nodes`, node 0's address instead.
  std::string masterAddr = "127.0.0.1";
  /// 0: a free port on masterAddr, outside the kernel's ephemeral range (findFreePort).
  std::uint16_t masterPort = 0;
  /// When a rank reports MASTER_PORT taken at rendezvous (rank 0's store: EADDRINUSE), run the
  /// ranks once more on a new free port, saying so through `note` (ddp-sim launch: when it chose
  /// the port itself).
  bool retryTakenPort = false;
  /// Called before that second run (the audit empties the first run's trace folder).
  std::function<void()> beforeRetry;
  /// Variables set for every rank on top of the launcher's environment and the torchrun ones
  /// (`--audit`: the trace folder and the recorder's PYTHONPATH).
  std::vector<std::pair<std::string, std::string>> extraEnv;
  /// python/ddph_launch/fork_server.py: the ranks of a Python program are forked from one
  /// interpreter that imported torch once (docs/ddp-sim.md, "How ranks start"). Empty: every
  /// rank execs the command.
  std::string forkServer;
  /// How long the fork server may take to be ready before the ranks are exec'd instead.
  std::chrono::milliseconds forkServerReady{120000};
  /// Told, in one line, why a Python program's ranks are exec'd though a fork server was asked for.
  std::function<void(const std::string&)> note;
  /// Where the ranks' prefixed stdout / stderr lines go.
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  /// Kept equal to the ranks running (started, not yet reaped: exec'd or forked by the fork
  /// server alike), for a progress line on another thread; null: not kept.
  std::atomic<int>* running = nullptr;
  /// Whether rank r (process pid), still running, has done its work, as its trace says
  /// (`ddp-sim launch --audit`): once every rank exited 0 or has done its work, those whose main
  /// thread waited in one futex wait for `exitSettle` hung at exit and are ended, and the launch
  /// succeeds
  /// (RankOutcome::kHungAtExit; NOTE [Hung at exit] in src/exit_hang.h). Null: never asked.
  std::function<bool(int rank, long pid)> workDone;
  std::chrono::milliseconds exitSettle{10000};
};

/// How one rank ended.
struct RankOutcome {
  enum class Kind { kRunning, kExited, kSignaled, kTimedOut, kStopped, kHungAtExit };
  int rank = 0;
  long pid = 0;
  Kind kind = Kind::kRunning;
  int code = 0;    ///< exit code (kExited)
  int signal = 0;  ///< signal number (kSignaled, kStopped, kHungAtExit)
  bool wasStopped = false;  ///< in the stop state (T) when the launcher began stopping the world
};

struct LaunchResult {
  std::vector<RankOutcome> ranks;
  /// The rank whose failure stopped the world, if one did.
  std::optional<RankOutcome> failure;
  /// The signal that interrupted the launcher (0: none).
  int interruptedBy = 0;
  std::uint16_t masterPort = 0;
  /// A rank said MASTER_PORT was already in use when its store bound it.
  bool portTaken = false;
  /// Where the program depends on each process's own string hashing, when the fork server found
  /// it (its ranks were exec'd: python/ddph_launch/process_hash.py); else empty.
  std::string hashDependence;
  /// One line: what happened ("rank 2 (pid 4711) was killed by signal 9 (SIGKILL)").
  std::string summary;
  /// 0 every rank succeeded (or did its work and hung at exit); 1 a rank failed or timed out;
  /// 128 + signal when interrupted.
  int exitCode = 0;
};

/// Starts the ranks and supervises them until all have ended. Throws ConfigError when the command
/// cannot be started (nothing is left running then).
LaunchResult launchRanks(const LaunchOptions& options);



/// "rank 2 (pid 4711) exited with code 3", "… was killed by signal 9 (SIGKILL)", …
std::string describeOutcome(const RankOutcome& outcome);

}  // namespace ddph::launch
