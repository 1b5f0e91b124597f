#pragma once
// A world of rank processes forked from the calling process (which has LibTorch loaded already,
// so no rank pays the ~0.4 s of loading it again): real processes, supervised by the rank
// supervisor `launch` uses too (makeForkedSpawner under core/launch/src/supervisor.h).
//
// Each rank runs `rankMain(rank, resultFd)` in its own process and exits with its return value; it
// reports to the supervisor by writing lines to resultFd (where a rank stood when it failed is in
// its trace, judged by the audit). Supervision: process group + PR_SET_PDEATHSIG;
// on the first failing rank, on the deadline or on SIGINT/SIGTERM every rank gets SIGTERM, then
// SIGKILL after `grace`; runForkedWorld returns only after every rank was reaped and every fd
// closed. A stop signal while the ranks are being forked ends the forking: the ranks not forked
// then have pid 0 and stoppedByUs.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ddph::launch {

/// Exit codes of a forked rank.
enum RankExitCode : int {
  kRankOk = 0,
  kRankPeerFailure = 10,  ///< a collective failed because a peer died (ProtocolError)
  kRankTimeout = 11,      ///< a collective or store wait ran past its deadline
  kRankConfigError = 12,
  kRankInternalError = 13,
};

struct ForkedRank {
  int rank = 0;
  pid_t pid = 0;        ///< 0: never forked (a stop signal came first)
  int exitCode = 0;     ///< when exited normally
  int signal = 0;       ///< when killed by a signal
  /// It ended of the supervisor's SIGTERM or SIGKILL, stopping the world.
  bool stoppedByUs = false;
  double peakRssMb = 0;      ///< ru_maxrss from wait4
  bool wasStopped = false;  ///< it was stopped (SIGSTOP, state T) when the supervisor stopped the world
  std::string output;        ///< everything it wrote to its result fd
};

struct ForkedWorldOptions {
  int worldSize = 1;
  std::chrono::milliseconds deadline{600000};  ///< the whole world
  std::chrono::milliseconds grace{2000};
};

struct ForkedWorldResult {
  std::vector<ForkedRank> ranks;
  std::optional<int> firstFailure;  ///< the first rank reaped with a failure
  double firstFailureSeconds = 0;
  double allReapedSeconds = 0;
  double spawnSeconds = 0;
  bool deadlinePassed = false;
  int interruptedBy = 0;
};

using RankMain = std::function<int(int rank, int resultFd)>;

ForkedWorldResult runForkedWorld(const ForkedWorldOptions& options, const RankMain& rankMain);

/// Writes all of `line` (plus '\n') to fd, retrying on EINTR / short writes.
void writeLine(int fd, const std::string& line);

}  // namespace ddph::launch
