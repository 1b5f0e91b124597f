#include "ddph/trace/launch_record.h"

#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <fstream>
#include <regex>

#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "json_fields.h"
#include "trace_schema.h"

namespace ddph::trace {

using common::writeFileAtomically;

namespace fs = std::filesystem;
namespace lr = trace_schema::launch_record;
using json_fields::field;
using json_fields::optionalField;
using nlohmann::json;
using common::ConfigError;

void writeLaunchRecord(const fs::path& dir, const LaunchRecord& record) {
  nlohmann::ordered_json j;
  j[lr::kLauncher] = record.launcher;
  j[lr::kWorldSize] = record.worldSize;
  j[lr::kExitCode] = record.exitCode;
  j[lr::kTimedOut] = record.timedOut;
  if (record.deadlineS) j[lr::kDeadlineS] = *record.deadlineS;
  j[lr::kInterruptedBySignal] = record.interruptedBy;
  auto& ranks = j[lr::kRanks] = nlohmann::ordered_json::array();
  for (const auto& r : record.ranks) {
    nlohmann::ordered_json rank = {{lr::ranks::kRank, r.rank},
                                   {lr::ranks::kPid, r.pid},
                                   {lr::ranks::kOutcome, r.outcome},
                                   {lr::ranks::kCode, r.code},
                                   {lr::ranks::kSignal, r.signal}};
    if (r.wasStopped) rank[lr::ranks::kWasStopped] = true;
    ranks.push_back(std::move(rank));
  }
  if (!record.command.empty()) {
    j[lr::kCommand] = record.command;
    j[lr::kCpu] = record.cpu;
    if (record.gpus) j[lr::kGpus] = *record.gpus;
    j[lr::kStandInData] = record.standInData;
  }
  if (!record.hashDependence.empty()) j[lr::kHashDependence] = record.hashDependence;
  writeFileAtomically(dir / lr::kFile, j.dump(2) + "\n");
}

std::optional<LaunchRecord> readLaunchRecord(const fs::path& launchFile) {
  std::error_code ec;
  if (!fs::exists(launchFile, ec)) return std::nullopt;
  std::ifstream in(launchFile, std::ios::binary);
  try {
    const json j = json::parse(in);
    LaunchRecord l;
    // Integral fields as in a rank's trace (valueAs): "world_size": 21474836E7 was a float
    // converted to int, undefined behaviour.
    l.launcher = j.value(lr::kLauncher, "");
    l.worldSize = field<int>(j, lr::kWorldSize);
    l.exitCode = optionalField<int>(j, lr::kExitCode).value_or(0);
    l.timedOut = j.value(lr::kTimedOut, false);
    l.deadlineS = optionalField<double>(j, lr::kDeadlineS);
    l.interruptedBy = optionalField<int>(j, lr::kInterruptedBySignal).value_or(0);
    for (const auto& r : j.at(lr::kRanks)) {
      LaunchedRank lr;
      lr.rank = field<int>(r, lr::ranks::kRank);
      lr.pid = optionalField<long>(r, lr::ranks::kPid).value_or(0);
      lr.outcome = r.at(lr::ranks::kOutcome).get<std::string>();
      lr.code = optionalField<int>(r, lr::ranks::kCode).value_or(0);
      lr.signal = optionalField<int>(r, lr::ranks::kSignal).value_or(0);
      lr.wasStopped = r.value(lr::ranks::kWasStopped, false);
      l.ranks.push_back(lr);
    }
    l.command = optionalField<std::vector<std::string>>(j, lr::kCommand).value_or(std::vector<std::string>{});
    l.cpu = j.value(lr::kCpu, false);
    l.gpus = optionalField<int>(j, lr::kGpus);
    l.standInData = j.value(lr::kStandInData, false);
    l.hashDependence = optionalField<std::string>(j, lr::kHashDependence).value_or("");
    DDPH_CHECK(l.worldSize > 0 && l.worldSize <= kMaxTraceWorldSize,
               "world_size {} is not between 1 and {}", l.worldSize, kMaxTraceWorldSize);
    return l;
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: not a launch record ({})", launchFile.string(), e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", launchFile.string(), e.what()));
  }
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
