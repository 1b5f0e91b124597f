// runForkedWorld: the ranks forked from this process (makeForkedSpawner,
// forked_world_spawner.cpp) under the one rank supervisor (supervisor.h); this file only maps what
// the supervisor saw to ForkedWorldResult.
#include "ddph/launch/forked_world.h"

#include <sys/resource.h>

#include <string>

#include "ddph/common/error.h"
#include "ddph/common/write_all.h"
#include "ddph/launch/rank_spawner.h"
#include "supervisor.h"

namespace ddph::launch {

using common::writeAll;

namespace {

// A world of W ranks holds W result pipes open at once.
void raiseFdLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

ForkedRank forkedRankOf(SupervisedRank&& seen) {
  ForkedRank rank;
  rank.rank = seen.rank;
  rank.pid = seen.pid;
  if (seen.end) {
    rank.exitCode = seen.end->code;
    rank.signal = seen.end->signal;
  }
  // A rank the world was stopped before was stopped by us too (pid 0: never started).
  rank.stoppedByUs = seen.pid == 0 || seen.stoppedByUs();
  rank.peakRssMb = seen.peakRssMb;
  rank.wasStopped = seen.wasStopped;
  rank.output = std::move(seen.results);
  return rank;
}

}  // namespace

void writeLine(int fd, const std::string& line) {
  writeAll(fd, line + "\n");  // an error: the supervisor is gone, nothing to report to
}

ForkedWorldResult runForkedWorld(const ForkedWorldOptions& options, const RankMain& rankMain) {
  DDPH_CHECK(options.worldSize > 0, "world size must be positive, got {}", options.worldSize);
  raiseFdLimit();
  SupervisorOptions supervision;
  supervision.worldSize = options.worldSize;
  supervision.timeout = options.deadline;
  supervision.grace = options.grace;
  Supervisor supervisor(std::move(supervision));
  const auto spawner = makeForkedSpawner(rankMain);
  SupervisedWorld world = supervisor.run(*spawner);

  ForkedWorldResult result;
  result.firstFailure = world.firstFailure;
  if (world.firstFailure) {
    result.firstFailureSeconds =
        world.ranks[static_cast<std::size_t>(*world.firstFailure)].endSeconds;
  }
  result.allReapedSeconds = world.allReapedSeconds;
  result.spawnSeconds = world.spawnSeconds;
  result.deadlinePassed = world.stopCause == StopCause::kDeadline;
  result.interruptedBy = world.interruptedBy;
  for (auto& seen : world.ranks) result.ranks.push_back(forkedRankOf(std::move(seen)));
  return result;
}

}  // namespace ddph::launch
