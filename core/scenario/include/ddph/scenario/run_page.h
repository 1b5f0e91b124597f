#pragma once
// `ddp-sim run --html`: the run report and its ranks' trace (the rank program writes one on every
// run, ScenarioTrace) as the HTML report's plain data.

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/trace/trace.h"
#include "ddph/report/html_report.h"
#include "ddph/scenario/run_report.h"
#include "ddph/scenario/scenario.h"

namespace ddph::scenario {

/// The properties a run of `scenario` is judged on, in the order the page lists them: an
/// evaluation's copies are judged by no-duplicates rather than disjointness, a resumed epoch by the
/// resume properties.
std::vector<std::string_view> runCheckedProperties(const Scenario& scenario);

/// The checked properties this run never judged, and why (one line): a run that stopped at a
/// collective mismatch or a rank failure before an epoch's end judged no partition of that epoch,
/// a one-epoch run no reshuffle, a run that did not finish no straggler. Never "ok" for those.
std::set<std::string> runNotApplicable(const Scenario& scenario, const RunReport& report,
                                       std::string* why = nullptr);

/// The page: the verdict, coverage per dataset and epoch and the rank timeline from `trace` (null:
/// none could be read; the timeline then has the measured times only), the measured compute and
/// wait per step from `report`, the straggler and failed ranks from its violations.
report::Page runPage(const RunReport& report, const trace::Trace* trace, const Scenario& scenario);

}  // namespace ddph::scenario
