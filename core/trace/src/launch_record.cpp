#include "ddph/trace/launch_record.h"

#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"

namespace ddph::trace {

using common::writeFileAtomically;

namespace fs = std::filesystem;

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

}  // namespace ddph::trace
