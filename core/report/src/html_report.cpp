// The page in section order: verdict, counterexample, coverage, timeline, training.
#include "ddph/report/html_report.h"

#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "sections.h"

namespace ddph::report {

using common::writeFileAtomically;

void checkReportPath(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  DDPH_CHECK(!path.empty() && !std::filesystem::is_directory(path, ec),
             "cannot write the HTML report to '{}': it is a folder", path.string());
  DDPH_CHECK(std::filesystem::is_directory(folder, ec),
             "cannot write the HTML report to '{}': no folder '{}'", path.string(), folder.string());
}

std::string renderHtml(const Page& page) {
  std::string body = detail::verdictSection(page.verdict);
  for (const auto& c : page.counterexamples) body += detail::counterexampleSection(c);
  if (!page.coverage.empty()) body += detail::coverageSection(page.coverage);
  if (page.timeline && !page.timeline->ranks.empty()) body += detail::timelineSection(*page.timeline);
  if (page.training) body += detail::trainingSection(*page.training);
  return detail::pageHtml(page, body);
}

void writeHtmlReport(const std::filesystem::path& path, const Page& page) {
  writeFileAtomically(path, renderHtml(page));
}

}  // namespace ddph::report
