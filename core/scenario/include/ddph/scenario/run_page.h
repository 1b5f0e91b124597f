#pragma once
// `ddp-sim run --html`: the run report and its ranks' trace (the rank program writes one when
// DDPH_AUDIT_DIR is set, ScenarioTrace) as the HTML report's plain data.

#include "ddph/audit/trace.h"
#include "ddph/report/html_report.h"
#include "ddph/scenario/run_report.h"

namespace ddph {

/// The properties a scenario run is judged on, in the order the page lists them.
const std::vector<std::string_view>& runCheckedProperties();

/// The page: the verdict, coverage per dataset and epoch and the rank timeline from `trace` (null:
/// none could be read; the timeline then has the measured times only), the measured compute and
/// wait per step from `report`, the straggler and failed ranks from its violations.
report::Page runPage(const RunReport& report, const audit::Trace* trace);

}  // namespace ddph
