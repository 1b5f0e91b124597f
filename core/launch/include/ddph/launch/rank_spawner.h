#pragma once
// The ways a world's rank processes start, behind one small interface the one rank supervisor
// (src/supervisor.h) is written against: exec'd children (ExecSpawner), ranks forked from a Python
// server that imported torch once (ForkServerSpawner) and ranks forked from this process
// (ForkedSpawner, ddp-sim run's). docs/ddp-sim.md, "How ranks start"; docs/architecture.md, "A way
// of starting ranks".

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddph/common/child_process.h"

namespace ddph::launch {

using EnvMap = std::map<std::string, std::string>;

/// One started rank: its pid, its pipes, its end.
class RankProcess {
 public:
  virtual ~RankProcess() = default;
  virtual pid_t pid() const = 0;
  /// The process group it is in (the supervisor stops the ranks by signalling it).
  virtual pid_t processGroup() const = 0;
  /// This side of the rank's stdout (1) or stderr (2) pipe, handed over once; the caller owns it.
  /// -1 when the rank has none (a forked rank writes to the terminal it inherited).
  virtual int takePipe(int stream) = 0;
  /// This side of the pipe the rank writes its results to, or -1 when it has none. Stays the
  /// RankProcess's (valid while it lives: a forked spawner closes it in the ranks it forks later).
  virtual int resultPipe() const { return -1; }
  /// How the rank ended, once it has (reaped); nothing while it runs. Never waits.
  virtual std::optional<common::ExitStatus> poll() = 0;
  /// Its peak resident memory in MiB (ru_maxrss) once poll() reported its end, when the spawner
  /// reaps it itself; 0 otherwise.
  virtual double peakRssMb() const { return 0; }
  /// SIGKILL, then waits until it is reaped.
  virtual void kill() = 0;
};

/// Starts the ranks of one launch. Every rank gets the launch's common environment (given to
/// the spawner) plus its own variables.
class RankSpawner {
 public:
  virtual ~RankSpawner() = default;
  /// Starts rank `rank` with `own` on top of the common environment, stdin /dev/null, stdout and
  /// stderr on pipes (or inherited, as the spawner says), in process group `group` (0, for the
  /// first rank: a group of the spawner's choice, then given by RankProcess::processGroup), dying
  /// with this process. Throws ConfigError when the program cannot start, Error otherwise.
  virtual std::unique_ptr<RankProcess> spawn(int rank, const EnvMap& own, pid_t group) = 0;
};

/// Ranks that exec `command` (argv; argv[0] looked up on PATH when it has no '/').
std::unique_ptr<RankSpawner> makeExecSpawner(std::vector<std::string> command, EnvMap common);

/// Ranks forked from this process (forked_world/): each runs `rankMain(rank, resultFd)` and exits
/// with its return value; `resultFd` is the write end of its RankProcess::resultPipe(). Its stdin,
/// stdout and stderr are this process's; `own` is set in its environment. The RankProcesses
/// report ru_maxrss (peakRssMb). Call it from one thread: the ranks are forked from it.
std::unique_ptr<RankSpawner> makeForkedSpawner(std::function<int(int rank, int resultFd)> rankMain);

/// A fork server for a Python program, or why there is none (the ranks are then exec'd).
struct ForkServerStart {
  std::unique_ptr<RankSpawner> spawner;
  std::string whyNot;  ///< empty when `spawner` is set
  /// Where the program depends on each process's own string hashing ("train.py:32 calls
  /// hash()"), when that is why the server declined (python/ddph_launch/process_hash.py).
  std::string hashDependence;
};

/// Starts `serverCommand` (the program's interpreter and options, the server script, the
/// program: python_program.h's forkServerCommand) with the common environment less the variables
/// in `perRank`, and waits until it has imported torch and can fork, `deadline` passes, or
/// `interruptFd` (when >= 0: the stop-signal pipe) becomes readable.
ForkServerStart startForkServer(const std::vector<std::string>& serverCommand, const EnvMap& common,
                                const std::vector<std::string>& perRank,
                                std::chrono::steady_clock::time_point deadline, int interruptFd = -1);

}  // namespace ddph::launch
