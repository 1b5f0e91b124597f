#pragma once
// A trace and its audit as the HTML report's plain data (ddph/report/html_report.h): what each
// rank consumed of each loader per epoch, where each rank spent its steps and where it stood, the
// first collective that had no partner or differed. `ddp-sim audit --html`, `launch --audit
// --html` and `run --html` (whose ranks write the same trace) build their pages from these.

#include <string>
#include <string_view>
#include <vector>

#include "ddph/audit/audit.h"
#include "ddph/audit/trace_records.h"
#include "ddph/report/html_report.h"
#include "ddph/sampler/property.h"

namespace ddph::audit {

/// The properties the audit judges, in the order the page lists them.
const std::vector<std::string_view>& auditedProperties();

/// Per loader and epoch, what each traced rank consumed (padding copies of torch's
/// DistributedSampler marked). Loaders whose consumed indices are unknown are left out, and so are
/// loaders whose ranks read different datasets (a per-rank Subset: one line each in `notDrawn`).
std::vector<report::CoverageEpoch> coverageOf(const Trace& trace,
                                              std::vector<std::string>* notDrawn = nullptr);

/// A row per rank: batches drawn, collectives entered, where it stood, how it ended (from
/// launch.json when there is one), failed when a rank-failure among `violations` names it; and the
/// first collective whose ranks differ or that some rank never entered; the ranks' lanes over time
/// (ddph/audit/rank_lanes.h).
report::Timeline timelineOf(const Trace& trace, const std::vector<sampler::Violation>& violations);

/// The whole page of `ddp-sim audit`.
report::Page auditPage(const Trace& trace, const AuditReport& report);

}  // namespace ddph::audit
