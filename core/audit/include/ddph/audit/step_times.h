#pragma once
// Where a traced rank spent its steps, from the "t" its trace lines carry (docs/trace-format.md):
// waiting inside collectives or computing between them. The audit page's timeline shows these as
// `ddp-sim run`'s pages show the times its ranks measure.

#include <optional>

#include "ddph/audit/trace_records.h"

namespace ddph::audit {

/// One rank's mean time per step (a step: a batch drawn), in milliseconds.
struct StepTimes {
  double computeMs = 0;  ///< outside every collective
  double waitMs = 0;     ///< inside some collective
  /// The median compute before a collective: from the first batch, or the previous collective's
  /// completion, to entering the next. Slow in most steps, not in the one a loaded scheduler held
  /// the rank back in (which a mean over a few steps cannot tell apart).
  double medianComputeMs = 0;
};

/// The rank's span runs from its first batch to its last batch or collective line (completion
/// included); `wait` is the part of it covered by collectives entered in it (overlapping ones once;
/// one never completed lasts until the rank's last line), `compute` the rest; both divided by the
/// batches drawn. Collectives before the first batch (set-up, the initial broadcast) are not
/// steps. nullopt when the rank drew no batch or a line of the span has no "t".
std::optional<StepTimes> stepTimesOf(const RankTrace& rank);

}  // namespace ddph::audit
