// Fuzz target: the audit trace reader (docs/trace-format.md), what `ddp-sim audit DIR` reads.
// The input is one rank's trace, rank-0.jsonl, optionally followed by a line
// "=== launch.json ===" and the launcher's record. It is read in memory (readRankTrace over a
// stream) and, when that succeeds, as a trace folder (readTrace: the folder-level checks and
// launch.json) in a private temporary folder. A ConfigError is the expected verdict.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include "ddph/audit/trace.h"
#include "ddph/common/error.h"
#include "fuzz_target.h"

namespace {
namespace fs = std::filesystem;

// One folder for the whole run, in $TMPDIR, removed at exit (scripts/fuzz.sh runs every target
// with TMPDIR in a folder of its own, so a crash leaves nothing behind either).
class TraceFolder {
 public:
  TraceFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddph-fuzz-trace-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TraceFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TraceFolder(const TraceFolder&) = delete;
  TraceFolder& operator=(const TraceFolder&) = delete;

  const fs::path& path() const { return path_; }

  // Writes `text` to `name` in the folder, or removes the file when `text` is absent.
  void put(const char* name, const std::string_view* text) const {
    std::error_code ec;
    fs::remove(path_ / name, ec);
    if (text == nullptr) return;
    std::ofstream out(path_ / name, std::ios::binary);
    out.write(text->data(), static_cast<std::streamsize>(text->size()));
  }

 private:
  fs::path path_;
};

constexpr std::string_view kLaunchSeparator = "\n=== launch.json ===\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = input.find(kLaunchSeparator);
  const std::string_view rankText = input.substr(0, cut);
  try {
    std::istringstream in{std::string(rankText)};
    ddph::audit::readRankTrace(in, "rank-0.jsonl");
  } catch (const ddph::ConfigError&) {
    return 0;
  }
  static const TraceFolder folder;
  const std::string_view launchText =
      cut == std::string_view::npos ? std::string_view() : input.substr(cut + kLaunchSeparator.size());
  folder.put("rank-0.jsonl", &rankText);
  folder.put("launch.json", cut == std::string_view::npos ? nullptr : &launchText);
  try {
    ddph::audit::readTrace(folder.path());
  } catch (const ddph::ConfigError&) {
  }
  return 0;
}
