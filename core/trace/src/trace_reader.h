#pragma once
// The reader's parts that the folder reader (trace_folder.cpp) uses: launch.json read back.

#include <filesystem>
#include <optional>

#include "ddph/trace/trace.h"

namespace ddph::trace {

/// `launchFile` read (docs/trace-format.md, "launch.json"), or nullopt when there is none;
/// ConfigError naming the file when it is not a launch record.
std::optional<LaunchRecord> readLaunchRecord(const std::filesystem::path& launchFile);

}  // namespace ddph::trace
