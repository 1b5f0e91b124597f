#pragma once
// How far the ranks of a running `ddp-sim run` are, for its progress line: shared memory
// (MAP_SHARED, made before the ranks fork) that each rank writes and a thread of the supervisor
// reads while runScenario runs.

#include <cstdint>

namespace ddph::scenario {

class RunProgress {
 public:
  explicit RunProgress(int worldSize);
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

  // In rank `rank`'s process.
  void joined(int rank);                       ///< connected to every peer
  void inEpoch(int rank, std::int64_t epoch);  ///< stepping in `epoch` (0-based)

  // Anywhere.
  int worldSize() const { return worldSize_; }
  int joinedRanks() const;
  /// Epochs every rank has left behind: the lowest epoch a rank is in (0 before any steps).
  std::int64_t epochsDone() const;

 private:
  struct Slot;
  Slot* slots_ = nullptr;
  int worldSize_ = 0;
};

}  // namespace ddph::scenario
