#include "ddph/audit/launch_record.h"

#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "ddph/launch/forked_world.h"
#include "ddph/launch/launcher.h"

namespace ddph::audit {

using common::writeFileAtomically;

namespace fs = std::filesystem;

namespace {

const char* outcomeName(launch::RankOutcome::Kind kind) {
  switch (kind) {
    case launch::RankOutcome::Kind::kRunning:
      return "running";
    case launch::RankOutcome::Kind::kExited:
      return "exited";
    case launch::RankOutcome::Kind::kSignaled:
      return "signaled";
    case launch::RankOutcome::Kind::kTimedOut:
      return "timed-out";
    case launch::RankOutcome::Kind::kStopped:
      return "stopped";
  }
  return "running";
}

}  // namespace

LaunchRecord launchRecordOf(const launch::LaunchResult& result, int worldSize,
                            std::optional<double> deadlineS) {
  LaunchRecord record;
  record.launcher = "ddp-sim launch";
  record.worldSize = worldSize;
  record.exitCode = result.exitCode;
  record.timedOut = result.failure && result.failure->kind == launch::RankOutcome::Kind::kTimedOut;
  record.deadlineS = deadlineS;
  record.interruptedBy = result.interruptedBy;
  for (const auto& r : result.ranks) {
    launch::RankOutcome::Kind kind = r.kind;
    // A timeout stops every rank: those still running then are the hung ones.
    if (record.timedOut && kind == launch::RankOutcome::Kind::kStopped)
      kind = launch::RankOutcome::Kind::kTimedOut;
    record.ranks.push_back({r.rank, r.pid, outcomeName(kind), r.code, r.signal, r.wasStopped});
  }
  return record;
}

LaunchRecord launchRecordOf(const launch::ForkedWorldResult& result, double deadlineS) {
  LaunchRecord record;
  record.launcher = "ddp-sim run";
  record.worldSize = static_cast<int>(result.ranks.size());
  record.timedOut = result.deadlinePassed;
  record.deadlineS = deadlineS;
  record.interruptedBy = result.interruptedBy;
  bool failed = false;
  for (const auto& r : result.ranks) {
    LaunchedRank l{r.rank, r.pid, "exited", r.exitCode, r.signal, r.wasStopped};
    if (r.stoppedByUs) {
      l.outcome = result.deadlinePassed ? "timed-out" : "stopped";
    } else if (r.signal != 0) {
      l.outcome = "signaled";
    }
    failed = failed || l.outcome != "exited" || l.code != 0;
    record.ranks.push_back(std::move(l));
  }
  record.exitCode = result.interruptedBy != 0 ? 128 + result.interruptedBy : (failed ? 1 : 0);
  return record;
}

void writeLaunchRecord(const fs::path& dir, const LaunchRecord& record) {
  nlohmann::ordered_json j;
  j["launcher"] = record.launcher;
  j["world_size"] = record.worldSize;
  j["exit_code"] = record.exitCode;
  j["timed_out"] = record.timedOut;
  if (record.deadlineS) j["deadline_s"] = *record.deadlineS;
  j["interrupted_by_signal"] = record.interruptedBy;
  auto& ranks = j["ranks"] = nlohmann::ordered_json::array();
  for (const auto& r : record.ranks) {
    nlohmann::ordered_json rank = {{"rank", r.rank},
                                   {"pid", r.pid},
                                   {"outcome", r.outcome},
                                   {"code", r.code},
                                   {"signal", r.signal}};
    if (r.wasStopped) rank["was_stopped"] = true;
    ranks.push_back(std::move(rank));
  }
  if (!record.command.empty()) {
    j["command"] = record.command;
    j["cpu"] = record.cpu;
    if (record.gpus) j["gpus"] = *record.gpus;
    j["stand_in_data"] = record.standInData;
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
