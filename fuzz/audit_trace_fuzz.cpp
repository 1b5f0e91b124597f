// Fuzz target: what `ddp-sim audit DIR` does with a trace folder (docs/trace-format.md): read it,
// judge it, report it. The input is rank 0's trace, rank-0.jsonl, optionally followed by more
// files, each after a line "=== NAME ===" where NAME is rank-<R>.jsonl (R at most 3 digits) or
// launch.json (the launcher's record). Rank 0's trace is first read in memory (readRankTrace over
// a stream); when that succeeds the files are written to a private temporary folder and read as a
// trace folder (readTrace: the folder-level checks, launch.json). A ConfigError is the expected
// verdict on a bad trace. A trace that reads must then be judged without an exception
// (auditTrace's contract: it never throws for what a trace says) and its JSON report, text
// summary and HTML page made.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "ddph/audit/audit.h"
#include "ddph/audit/audit_page.h"
#include "ddph/trace/trace.h"
#include "ddph/common/error.h"
#include "ddph/common/private_folder.h"
#include "ddph/report/html_report.h"
#include "fuzz_target.h"

namespace {
namespace fs = std::filesystem;

// The input's files: (name, text), rank-0.jsonl first. A "=== NAME ===" line with another name
// is part of the text before it.
std::vector<std::pair<std::string, std::string_view>> filesOf(std::string_view input) {
  static const std::regex kName(R"(rank-[0-9]{1,3}\.jsonl|launch\.json)");
  std::vector<std::pair<std::string, std::string_view>> files{{"rank-0.jsonl", {}}};
  std::size_t start = 0, from = 0;
  for (;;) {
    const std::size_t open = input.find("\n=== ", from);
    if (open == std::string_view::npos) break;
    const std::size_t close = input.find(" ===\n", open + 5);
    if (close == std::string_view::npos) break;
    const std::string name(input.substr(open + 5, close - open - 5));
    from = open + 1;
    if (!std::regex_match(name, kName)) continue;
    files.back().second = input.substr(start, open - start);
    start = close + 5;
    files.emplace_back(name, std::string_view());
    from = start;
  }
  files.back().second = input.substr(start);
  return files;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto files = filesOf(std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    std::istringstream in{std::string(files.front().second)};
    ddph::trace::readRankTrace(in, "rank-0.jsonl");
  } catch (const ddph::common::ConfigError&) {
    return 0;
  }
  // One folder for the whole run, in $TMPDIR, removed at exit (scripts/fuzz.sh runs every target
  // with TMPDIR in a folder of its own, so a crash leaves nothing behind either).
  static const ddph::common::PrivateFolder folder("ddph-fuzz-trace-");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder.path(), ec)) fs::remove(entry.path(), ec);
  for (const auto& [name, text] : files) {
    std::ofstream out(fs::path(folder.path()) / name, std::ios::binary | std::ios::app);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  ddph::trace::Trace trace;
  try {
    trace = ddph::trace::readTrace(folder.path());
  } catch (const ddph::common::ConfigError&) {
    return 0;
  }
  const ddph::audit::AuditReport report = ddph::audit::auditTrace(trace);
  const std::string json = ddph::audit::auditReportJson(report);
  const std::string text = ddph::audit::auditReportText(report);
  const std::string page = ddph::report::renderHtml(ddph::audit::auditPage(trace, report));
  if (json.empty() || text.empty() || page.empty()) std::abort();
  return 0;
}
