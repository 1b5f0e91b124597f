// Fuzz target: the audit trace reader (docs/trace-format.md), what `ddp-sim audit DIR` reads.
// The input is one rank's trace, rank-0.jsonl, optionally followed by a line
// "=== launch.json ===" and the launcher's record. It is read in memory (readRankTrace over a
// stream) and, when that succeeds, as a trace folder (readTrace: the folder-level checks and
// launch.json) in a private temporary folder. A ConfigError is the expected verdict.
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
#include "ddph/common/private_folder.h"
#include "fuzz_target.h"

namespace {
namespace fs = std::filesystem;

// Writes `text` to `name` in `folder`, or removes the file when `text` is absent.
void put(const fs::path& folder, const char* name, const std::string_view* text) {
  std::error_code ec;
  fs::remove(folder / name, ec);
  if (text == nullptr) return;
  std::ofstream out(folder / name, std::ios::binary);
  out.write(text->data(), static_cast<std::streamsize>(text->size()));
}

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
  // One folder for the whole run, in $TMPDIR, removed at exit (scripts/fuzz.sh runs every target
  // with TMPDIR in a folder of its own, so a crash leaves nothing behind either).
  static const ddph::PrivateFolder folder("ddph-fuzz-trace-");
  const std::string_view launchText =
      cut == std::string_view::npos ? std::string_view() : input.substr(cut + kLaunchSeparator.size());
  put(folder.path(), "rank-0.jsonl", &rankText);
  put(folder.path(), "launch.json", cut == std::string_view::npos ? nullptr : &launchText);
  try {
    ddph::audit::readTrace(folder.path());
  } catch (const ddph::ConfigError&) {
  }
  return 0;
}
