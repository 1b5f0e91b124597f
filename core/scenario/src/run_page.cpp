// The run report and its trace as the HTML report's data (ddph/scenario/run_page.h).
#include "ddph/scenario/run_page.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include <set>

#include "ddph/audit/audit_page.h"
#include "ddph/report/verdict.h"

namespace ddph::scenario {

namespace property = sampler::property;

std::vector<std::string_view> runCheckedProperties(const Scenario& s) {
  std::vector<std::string_view> out;
  if (s.resume) {
    out = {property::kResumeExactlyOnce, property::kResumeBalance};
  } else {
    out = {property::kValidRange, property::kCoverage,
           s.phase == "eval" ? property::kNoDuplicates : property::kDisjointness,
           property::kEqualLength, property::kReshuffle};
  }
  for (auto p : {property::kCollectiveMismatch, property::kRankFailure, property::kStraggler}) {
    out.push_back(p);
  }
  return out;
}

std::set<std::string> runNotApplicable(const Scenario& s, const RunReport& r, std::string* why) {
  // The epoch the run stopped in, when it stopped before its end (the partitions of that epoch
  // and the later ones were never gathered).
  std::optional<std::int64_t> stoppedAt;
  for (const auto& v : r.violations) {
    if (v.property != property::kCollectiveMismatch && v.property != property::kRankFailure) continue;
    const std::int64_t epoch = std::max<std::int64_t>(v.epoch, 0);
    stoppedAt = stoppedAt ? std::min(*stoppedAt, epoch) : epoch;
  }
  if (r.interruptedBy != 0) stoppedAt = 0;
  std::set<std::string> out;
  std::vector<std::string> reasons;
  for (const auto p : runCheckedProperties(s)) {
    const std::string name(p);
    const bool partition = p != property::kCollectiveMismatch && p != property::kRankFailure &&
                           p != property::kStraggler && p != property::kReshuffle;
    if (p == property::kReshuffle && (s.epochs < 2 || (stoppedAt && *stoppedAt < 2))) {
      out.insert(name);
    } else if ((partition && stoppedAt && *stoppedAt == 0) ||
               (p == property::kStraggler && stoppedAt)) {
      out.insert(name);
    }
  }
  if (s.epochs < 2 && out.count(std::string(property::kReshuffle))) {
    reasons.push_back("reshuffle (one epoch)");
  }
  if (stoppedAt) {
    std::vector<std::string> stopped;
    for (const auto& name : out) {
      if (name != property::kReshuffle || s.epochs >= 2) stopped.push_back(name);
    }
    if (!stopped.empty()) {
      reasons.push_back(fmt::format("{} (the run stopped in epoch {}, before that epoch's end)",
                                    fmt::join(stopped, ", "), *stoppedAt));
    }
  }
  // What was found is judged, whatever stopped the run after it.
  for (const auto& v : r.violations) out.erase(v.property);
  if (why && !reasons.empty()) *why = fmt::format("not judged: {}", fmt::join(reasons, "; "));
  return out;
}

namespace {

// NOTE [Padding after an elastic resume] (docs/elastic-resume.md): the elastic sampler resumed on
// W' ranks splits the rest of the epoch (R = N - stop x batch x W samples) as DistributedSampler
// splits an epoch, padded to a multiple of W' with the order's head: rank r's last index is a
// padding copy when r >= R mod W' (R mod W' != 0). The trace records the indices only; the planned
// run says which copies are padding, so the chart draws them as padding, not as consumed twice.
void markResumePadding(const Scenario& s, std::vector<report::CoverageEpoch>& coverage) {
  if (!s.resume || s.resume->keepRankPositions || s.datasets.empty() ||
      s.datasets.front().sampler != "elastic" || coverage.empty()) {
    return;
  }
  const std::int64_t resumed = s.resume->worldSize;
  const std::int64_t rest =
      coverage.front().datasetSize - s.resume->stopAfterSteps * s.batchSize * s.worldSize;
  if (resumed <= 0 || rest <= 0 || rest % resumed == 0) return;
  report::CoverageEpoch& epoch = coverage.front();  // the epoch the run stopped and resumed in
  for (auto& r : epoch.ranks) {
    if (r.rank < resumed && r.rank >= rest % resumed && !r.indices.empty()) {
      r.paddingFrom = r.indices.size() - 1;
    }
  }
}

}  // namespace

report::Page runPage(const RunReport& r, const trace::Trace* trace, const Scenario& scenario) {
  report::Page page;
  page.title = fmt::format("ddp-sim run {}", r.scenario);
  page.subtitle = fmt::format("{} on {} rank processes: {}{}", r.source, r.worldSize,
                              r.passed ? "PASSED" : "FAILED",
                              r.description.empty() ? "" : " — " + r.description);
  std::vector<std::string> notes = r.notes;
  if (!trace) notes.push_back("the ranks' trace could not be read: no coverage chart");
  std::string notJudged;
  const auto notApplicable = runNotApplicable(scenario, r, &notJudged);
  if (!notJudged.empty()) notes.push_back(notJudged);
  page.verdict =
      report::verdictOf(r.passed, r.violations, notes, runCheckedProperties(scenario), notApplicable);
  std::set<std::int64_t> stragglers, failed;
  for (const auto& v : r.violations) {
    if (v.property == property::kStraggler) stragglers.insert(v.ranks.begin(), v.ranks.end());
    if (v.property == property::kRankFailure) failed.insert(v.ranks.begin(), v.ranks.end());
  }
  report::Timeline timeline;
  if (trace) {
    page.coverage = audit::coverageOf(*trace, &page.coverageNotes);
    markResumePadding(scenario, page.coverage);
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

}  // namespace ddph::scenario
