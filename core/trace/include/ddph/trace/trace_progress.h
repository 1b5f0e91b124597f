#pragma once
// How far the ranks of a traced run are while it runs, from the trace files being written
// (docs/trace-format.md): `ddp-sim launch --audit`'s progress line. Each call reads only what
// was appended since the last one, so it can be called a few times a second on large traces.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ddph::trace {

class TraceProgress {
 public:
  TraceProgress(std::filesystem::path dir, int worldSize);
  ~TraceProgress();
  TraceProgress(TraceProgress&&) noexcept;
  TraceProgress& operator=(TraceProgress&&) noexcept;

  struct Counts {
    int joined = 0;               ///< ranks whose trace has a completed collective
    std::int64_t epochsDone = 0;  ///< passes of loader 0 that every rank has ended (epoch_end)
  };
  /// Reads what the rank files gained since the last call. Never throws: a file not there yet,
  /// or a line being written, counts as nothing yet.
  Counts read();

 private:
  struct RankFile;  // trace_progress.cpp
  void readRank(RankFile& file);

  std::vector<RankFile> ranks_;
};

}  // namespace ddph::trace
