#pragma once
// The launcher's part of a trace: `launch.json` (docs/trace-format.md; its fields in the trace's
// schema, launch_record), how each rank process ended as the launcher saw it, written and read here;
// and the trace folder the ranks write into.

#include <filesystem>
#include <optional>
#include <string>

#include "ddph/trace/trace.h"
#include "ddph/common/private_folder.h"

namespace ddph::trace {

/// Writes `dir/launch.json` atomically (docs/trace-format.md "launch.json").
void writeLaunchRecord(const std::filesystem::path& dir, const LaunchRecord& record);

/// `launchFile` read (docs/trace-format.md, "launch.json"), or nullopt when there is none;
/// ConfigError naming the file when it is not a launch record.
std::optional<LaunchRecord> readLaunchRecord(const std::filesystem::path& launchFile);

/// Makes `dir` ready for a new run's trace: creates it (and its parents) when missing, and refuses
/// (ConfigError) a folder that already holds a trace, so that two runs never mix.
void prepareTraceDir(const std::filesystem::path& dir);

/// The trace folder of one run: the user's (prepared with prepareTraceDir, kept), or a private
/// temporary one under the temp folder, removed with this object.
class TraceFolder {
 public:
  /// `dir` empty: a temporary folder (ConfigError when none can be made).
  explicit TraceFolder(const std::optional<std::string>& dir);
  ~TraceFolder();
  TraceFolder(const TraceFolder&) = delete;
  TraceFolder& operator=(const TraceFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }
  /// Removes what a run of the ranks wrote in it (rank and spawner files, attempt folders): the
  /// launcher runs them again.
  void clear();

 private:
  std::filesystem::path path_;
  std::optional<common::PrivateFolder> temporary_;  ///< the folder made when none was given
};

}  // namespace ddph::trace
