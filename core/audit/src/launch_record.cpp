#include "ddph/audit/launch_record.h"

#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "ddph/launch/launcher.h"

namespace ddph::audit {
namespace fs = std::filesystem;

namespace {

const char* outcomeName(RankOutcome::Kind kind) {
  switch (kind) {
    case RankOutcome::Kind::kRunning: return "running";
    case RankOutcome::Kind::kExited: return "exited";
    case RankOutcome::Kind::kSignaled: return "signaled";
    case RankOutcome::Kind::kTimedOut: return "timed-out";
    case RankOutcome::Kind::kStopped: return "stopped";
  }
  return "running";
}

}  // namespace

void writeLaunchRecord(const fs::path& dir, const LaunchResult& result, int worldSize) {
  const bool timedOut =
      result.failure && result.failure->kind == RankOutcome::Kind::kTimedOut;
  nlohmann::ordered_json j;
  j["launcher"] = "ddp-sim launch";
  j["world_size"] = worldSize;
  j["exit_code"] = result.exitCode;
  j["timed_out"] = timedOut;
  j["interrupted_by_signal"] = result.interruptedBy;
  auto& ranks = j["ranks"] = nlohmann::ordered_json::array();
  for (const auto& r : result.ranks) {
    RankOutcome::Kind kind = r.kind;
    // A timeout stops every rank: those still running then are the hung ones.
    if (timedOut && kind == RankOutcome::Kind::kStopped) kind = RankOutcome::Kind::kTimedOut;
    ranks.push_back({{"rank", r.rank},
                     {"pid", r.pid},
                     {"outcome", outcomeName(kind)},
                     {"code", r.code},
                     {"signal", r.signal}});
  }
  writeFileAtomically(dir / "launch.json", j.dump(2) + "\n");
}

void prepareTraceDir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  DDPH_CHECK(!ec && fs::is_directory(dir), "cannot use '{}' as the trace folder: {}", dir.string(),
             ec ? ec.message() : "not a folder");
  static const std::regex kTraceFile(R"(rank-\d+\.jsonl|launch\.json)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    DDPH_CHECK(!std::regex_match(entry.path().filename().string(), kTraceFile),
               "'{}' already holds a trace ({}): give each run its own --trace-dir",
               dir.string(), entry.path().filename().string());
  }
  DDPH_CHECK(!ec, "cannot list '{}': {}", dir.string(), ec.message());
}

TraceFolder::TraceFolder(const std::optional<std::string>& dir) {
  if (dir) {
    path_ = *dir;
    prepareTraceDir(path_);
    return;
  }
  temporary_.emplace("ddph-audit-");
  path_ = temporary_->path();
}

TraceFolder::~TraceFolder() = default;

void TraceFolder::clear() {
  static const std::regex kRunFile(R"((rank|spawner)-\d+\.jsonl|attempt-\d+)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    if (std::regex_match(entry.path().filename().string(), kRunFile)) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace ddph::audit
