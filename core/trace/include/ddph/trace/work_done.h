#pragma once
// Whether a rank of a run being traced has done its work while its process still runs, from the
// trace files being written: what `ddp-sim launch --audit` asks before it ends a rank as hung at
// exit (NOTE [Hung at exit], core/launch/src/exit_hang.h; docs/ddp-sim.md, "A rank that hangs at
// exit"). Each call reads only what the rank's file gained since the last one.
#include <filesystem>
#include <memory>
#include <vector>

namespace ddph::trace {

class WorkDone {
 public:
  WorkDone(std::filesystem::path dir, int worldSize);
  ~WorkDone();
  WorkDone(WorkDone&&) noexcept;
  WorkDone& operator=(WorkDone&&) noexcept;

  /// Whether rank `rank`'s trace, written by process `pid`, says its work is done: an `end` line
  /// with code 0 (what is left is the interpreter's teardown), or destroy_process_group of the
  /// default group with DDP modules alive, then each one's final `params` line (freeing them is
  /// what is left: NOTE [DDP alive at destroy_process_group], docs/audit.md). Never when it
  /// raised, or entered a collective after the destroy. Never throws: a file not there yet, of
  /// another process, or a line being written, is not done.
  bool operator()(int rank, long pid);

 private:
  struct RankFile;  // work_done.cpp
  std::vector<RankFile> ranks_;
};

}  // namespace ddph::trace
