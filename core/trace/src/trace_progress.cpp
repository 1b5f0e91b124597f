#include "ddph/trace/trace_progress.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "appended_lines.h"
#include "trace_schema.h"

namespace ddph::trace {
namespace ts = trace_schema;

struct TraceProgress::RankFile {
  AppendedLines lines;
  bool joined = false;
  std::int64_t epochsDone = 0;
};

TraceProgress::~TraceProgress() = default;
TraceProgress::TraceProgress(TraceProgress&&) noexcept = default;
TraceProgress& TraceProgress::operator=(TraceProgress&&) noexcept = default;

TraceProgress::TraceProgress(std::filesystem::path dir, int worldSize) {
  for (int r = 0; r < worldSize; ++r) {
    ranks_.push_back(RankFile{AppendedLines(dir / ("rank-" + std::to_string(r) + ".jsonl"))});
  }
}

void TraceProgress::readRank(RankFile& file) {
  file.lines.read([&file](std::string_view line) {
    // Only two kinds of line matter; the others (most of a trace: batches) are not parsed.
    static const std::string kDone = quotedEvent(ts::coll_done::kEvent);
    static const std::string kEnded = quotedEvent(ts::epoch_end::kEvent);
    const bool done = line.find(kDone) != std::string_view::npos;
    const bool ended = line.find(kEnded) != std::string_view::npos;
    if (!done && !ended) return;
    const auto event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object()) return;
    const auto ev = event.find(ts::kEv);
    const auto loader = event.find(ts::epoch_end::kLoader);
    if (ev == event.end() || !ev->is_string()) return;
    if (*ev == ts::coll_done::kEvent) file.joined = true;
    if (*ev == ts::epoch_end::kEvent && loader != event.end() && loader->is_number_integer() &&
        *loader == 0) {
      ++file.epochsDone;
    }
  });
}

TraceProgress::Counts TraceProgress::read() {
  Counts counts;
  for (auto& file : ranks_) {
    readRank(file);
    counts.joined += file.joined ? 1 : 0;
  }
  if (!ranks_.empty()) {
    counts.epochsDone = std::min_element(ranks_.begin(), ranks_.end(), [](const RankFile& a, const RankFile& b) {
                          return a.epochsDone < b.epochsDone;
                        })->epochsDone;
  }
  return counts;
}

}  // namespace ddph::trace
