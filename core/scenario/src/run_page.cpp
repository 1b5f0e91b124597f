// The run report and its trace as the HTML report's data (ddph/scenario/run_page.h).
#include "ddph/scenario/run_page.h"

#include <fmt/format.h>

#include <set>

#include "ddph/audit/audit_page.h"

namespace ddph {

const std::vector<std::string_view>& runCheckedProperties() {
  static const std::vector<std::string_view> kProperties = {
      property::kValidRange,         property::kCoverage,    property::kDisjointness,
      property::kEqualLength,        property::kReshuffle,   property::kCollectiveMismatch,
      property::kRankFailure,        property::kStraggler};
  return kProperties;
}

report::Page runPage(const RunReport& r, const audit::Trace* trace) {
  report::Page page;
  page.title = fmt::format("ddp-sim run {}", r.scenario);
  page.subtitle = fmt::format("{} on {} rank processes: {}{}", r.source, r.worldSize,
                              r.passed ? "PASSED" : "FAILED",
                              r.description.empty() ? "" : " — " + r.description);
  std::vector<std::string> notes = r.notes;
  if (!trace) notes.push_back("the ranks' trace could not be read: no coverage chart");
  page.verdict = audit::verdictOf(r.passed, r.violations, notes, runCheckedProperties());
  std::set<std::int64_t> stragglers, failed;
  for (const auto& v : r.violations) {
    if (v.property == property::kStraggler) stragglers.insert(v.ranks.begin(), v.ranks.end());
    if (v.property == property::kRankFailure) failed.insert(v.ranks.begin(), v.ranks.end());
  }
  report::Timeline timeline;
  if (trace) {
    page.coverage = audit::coverageOf(*trace);
    timeline = audit::timelineOf(*trace, r.violations);
  } else {
    for (int rank = 0; rank < r.worldSize; ++rank) timeline.ranks.push_back({rank, 0, 0, {}, {}, "", "", false, false});
  }
  for (auto& row : timeline.ranks) {
    const auto k = static_cast<std::size_t>(row.rank);
    // What the rank measured around its allreduce, where it did, rather than the trace's times
    // (which count the trace's own writing as compute).
    const double compute = k < r.stepComputeMs.size() ? r.stepComputeMs[k] : 0;
    const double wait = k < r.stepWaitMs.size() ? r.stepWaitMs[k] : 0;
    if (compute > 0 || wait > 0) {
      row.computeMs = compute;
      row.waitMs = wait;
    }
    row.straggler = stragglers.count(row.rank) > 0;
    row.failed = row.failed || failed.count(row.rank) > 0;
  }
  page.timeline = std::move(timeline);
  return page;
}

}  // namespace ddph
