#pragma once
// Each traced rank's time as the HTML report's lanes (ddph/report/html_report.h): from the "t" its
// trace lines carry (docs/trace-format.md), the stretches it spent inside collectives (wait) and
// between them (compute), where its trace ends and how.

#include <optional>
#include <vector>

#include "ddph/audit/trace_records.h"
#include "ddph/report/html_report.h"

namespace ddph::audit {

/// One rank's lane, from `startsAt` (its recorder's start on the run's time line) to its last
/// line: wait while inside some collective (entered to completed, overlapping ones once; one
/// never completed lasts until the last line), compute the rest. Its end: failed (an error line,
/// an end with a code other than 0, or `launched` saw it exit so or die of a signal), ended, never
/// completed its last collective, else stopped. `divergence`: the first divergent collective,
/// whose entry time the lane marks. nullopt when a line it needs carries no "t".
std::optional<report::RankLane> rankLaneOf(const RankTrace& rank,
                                           const std::optional<report::CollectiveDivergence>& divergence,
                                           const LaunchedRank* launched = nullptr,
                                           double startsAt = 0);

/// The lanes of every traced rank with times, in rank order (launch.json's outcomes, when there is
/// one), on one time line: a lane starts at its rank's `start_unix` after the earliest rank's when
/// every header has one, else at 0 (ranks started together).
std::vector<report::RankLane> rankLanesOf(const Trace& trace,
                                          const std::optional<report::CollectiveDivergence>& divergence);

}  // namespace ddph::audit
