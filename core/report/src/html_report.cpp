// The page in section order: verdict, counterexample, coverage, timeline, training.
#include "ddph/report/html_report.h"

#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "sections.h"

namespace ddph::report {

using common::writeFileAtomically;

void checkReportPath(const std::filesystem::path& path) {
  common::checkWritableFile(path, "HTML report");
}

std::string renderHtml(const Page& page) {
  std::string body = detail::verdictSection(page.verdict);
  for (const auto& c : page.counterexamples) body += detail::counterexampleSection(c);
  if (!page.coverage.empty() || !page.coverageNotes.empty()) {
    body += detail::coverageSection(page.coverage, page.coverageNotes, page.verdict);
  }
  if (page.timeline && !page.timeline->ranks.empty()) body += detail::timelineSection(*page.timeline);
  if (page.training) body += detail::trainingSection(*page.training);
  return detail::pageHtml(page, body);
}

void writeHtmlReport(const std::filesystem::path& path, const Page& page) {
  writeFileAtomically(path, renderHtml(page));
}

}  // namespace ddph::report
