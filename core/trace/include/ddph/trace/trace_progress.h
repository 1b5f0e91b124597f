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

  struct Counts {
    int joined = 0;               ///< ranks whose trace has a completed collective
    std::int64_t epochsDone = 0;  ///< passes of loader 0 that every rank has ended (epoch_end)
  };
  /// Reads what the rank files gained since the last call. Never throws: a file not there yet,
  /// or a line being written, counts as nothing yet.
  Counts read();

 private:
  struct RankFile {
    std::uintmax_t offset = 0;
    std::string partial;  ///< a line not ended yet
    bool joined = false;
    std::int64_t epochsDone = 0;
  };
  void readRank(int rank, RankFile& file);

  std::filesystem::path dir_;
  std::vector<RankFile> ranks_;
};

}  // namespace ddph::trace
