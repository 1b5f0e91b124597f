#include "ddph/trace/work_done.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "appended_lines.h"
#include "trace_schema.h"

namespace ddph::trace {
namespace ts = trace_schema;
using nlohmann::json;

struct WorkDone::RankFile {
  AppendedLines lines;
  long pid = 0;
  bool ended = false;  ///< an `end` line with code 0
  bool raised = false;
  bool destroyed = false;             ///< the default group, with DDP modules alive
  std::set<std::int64_t> stillAlive;  ///< of those, the ones not freed yet

  void take(const json& e);
  bool done() const { return !raised && (ended || (destroyed && stillAlive.empty())); }
};

namespace {

template <typename T>
T valueOr(const json& e, const char* key, T otherwise) {
  const auto it = e.find(key);
  if (it == e.end()) return otherwise;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return otherwise;
  }
}

}  // namespace

void WorkDone::RankFile::take(const json& e) {
  const std::string ev = valueOr<std::string>(e, ts::kEv, "");
  if (ev == ts::header::kEvent) {
    pid = valueOr<long>(e, ts::header::kPid, 0);
  } else if (ev == ts::end::kEvent) {
    ended = valueOr<std::int64_t>(e, ts::end::kCode, 0) == 0;
  } else if (ev == ts::error::kEvent) {
    raised = true;
  } else if (ev == ts::destroy::kEvent) {
    if (valueOr<std::string>(e, ts::destroy::kGroup, "0") != "0") return;
    const auto alive = valueOr<std::vector<std::int64_t>>(e, ts::destroy::kDdpAlive, {});
    destroyed = !alive.empty();
    stillAlive = {alive.begin(), alive.end()};
  } else if (ev == ts::params::kEvent) {
    if (valueOr<std::string>(e, ts::params::kAt, "") == "end") {
      stillAlive.erase(valueOr<std::int64_t>(e, ts::params::kDdp, -1));
    }
  } else if (ev == ts::coll::kEvent) {
    destroyed = false;  // it went on communicating: not at its exit
  }
}

WorkDone::~WorkDone() = default;
WorkDone::WorkDone(WorkDone&&) noexcept = default;
WorkDone& WorkDone::operator=(WorkDone&&) noexcept = default;

WorkDone::WorkDone(std::filesystem::path dir, int worldSize) {
  for (int r = 0; r < worldSize; ++r) {
    ranks_.push_back(RankFile{AppendedLines(dir / ("rank-" + std::to_string(r) + ".jsonl"))});
  }
}

bool WorkDone::operator()(int rank, long pid) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return false;
  RankFile& file = ranks_[static_cast<std::size_t>(rank)];
  file.lines.read([&file](std::string_view line) {
    // The few kinds of line that matter; the others (most of a trace) are not parsed.
    static const std::array<std::string, 6> kWanted = {
        quotedEvent(ts::header::kEvent), quotedEvent(ts::end::kEvent),
        quotedEvent(ts::error::kEvent),  quotedEvent(ts::destroy::kEvent),
        quotedEvent(ts::params::kEvent), quotedEvent(ts::coll::kEvent)};
    const auto head = line.substr(0, 24);  // {"ev":"…": the name comes first
    if (std::none_of(kWanted.begin(), kWanted.end(),
                     [head](const std::string& w) { return head.find(w) != std::string_view::npos; }))
      return;
    const auto event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_object()) file.take(event);
  });
  return file.pid == pid && file.done();
}

}  // namespace ddph::trace
