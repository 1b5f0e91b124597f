#include "ddph/trace/trace_progress.h"

#include <algorithm>
#include <fstream>
#include <string_view>
#include <nlohmann/json.hpp>

#include "trace_schema.h"

namespace ddph::trace {
namespace ts = trace_schema;

namespace {
// `"name"`: how an event's name appears in its line, found before the line is parsed.
std::string quoted(const char* name) { return std::string("\"") + name + "\""; }
}  // namespace

TraceProgress::TraceProgress(std::filesystem::path dir, int worldSize)
    : dir_(std::move(dir)), ranks_(static_cast<std::size_t>(std::max(0, worldSize))) {}

void TraceProgress::readRank(int rank, RankFile& file) {
  std::ifstream in(dir_ / ("rank-" + std::to_string(rank) + ".jsonl"), std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(file.offset));
  // The Python writer reserves its file ahead of its lines (megabytes of NUL bytes): what is
  // written ends at the first NUL, and the rest is not read.
  std::string chunk;
  char block[1 << 16];
  while (in.read(block, sizeof block), in.gcount() > 0) {
    const std::string_view got(block, static_cast<std::size_t>(in.gcount()));
    const auto nul = got.find('\0');
    chunk.append(got.substr(0, nul));
    if (nul != std::string_view::npos) break;
  }
  file.offset += chunk.size();
  file.partial += chunk;
  std::size_t start = 0;
  for (std::size_t end; (end = file.partial.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string_view line(file.partial.data() + start, end - start);
    // Only two kinds of line matter; the others (most of a trace: batches) are not parsed.
    static const std::string kDone = quoted(ts::coll_done::kEvent);
    static const std::string kEnded = quoted(ts::epoch_end::kEvent);
    const bool done = line.find(kDone) != std::string_view::npos;
    const bool ended = line.find(kEnded) != std::string_view::npos;
    if (!done && !ended) continue;
    const auto event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object()) continue;
    const auto ev = event.find(ts::kEv);
    const auto loader = event.find(ts::epoch_end::kLoader);
    if (ev == event.end() || !ev->is_string()) continue;
    if (*ev == ts::coll_done::kEvent) file.joined = true;
    if (*ev == ts::epoch_end::kEvent && loader != event.end() && loader->is_number_integer() &&
        *loader == 0) {
      ++file.epochsDone;
    }
  }
  file.partial.erase(0, start);
}

TraceProgress::Counts TraceProgress::read() {
  Counts counts;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    readRank(static_cast<int>(r), ranks_[r]);
    counts.joined += ranks_[r].joined ? 1 : 0;
  }
  if (!ranks_.empty()) {
    counts.epochsDone = std::min_element(ranks_.begin(), ranks_.end(), [](const RankFile& a, const RankFile& b) {
                          return a.epochsDone < b.epochsDone;
                        })->epochsDone;
  }
  return counts;
}

}  // namespace ddph::trace
