#pragma once
// Private to ddph::trace: the whole lines a rank file being written gained since the last read
// (TraceProgress, WorkDone). The Python writer reserves its file ahead of its lines (megabytes of
// NUL bytes): what is written ends at the first NUL, and the rest is not read.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace ddph::trace {

class AppendedLines {
 public:
  explicit AppendedLines(std::filesystem::path file) : file_(std::move(file)) {}
  /// Calls `line` with each whole line appended since the last call (a file not there yet, or a
  /// line being written, is nothing yet). Never throws.
  void read(const std::function<void(std::string_view line)>& line);

 private:
  std::filesystem::path file_;
  std::uintmax_t offset_ = 0;
  std::string partial_;  ///< a line not ended yet
};

/// `"name"`: how an event's name appears in its line, looked for before the line is parsed.
std::string quotedEvent(const char* name);

}  // namespace ddph::trace
