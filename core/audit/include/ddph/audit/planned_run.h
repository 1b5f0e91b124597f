#pragma once
// What a caller that planned the run knows beyond its trace, as the one judge takes it (audit.h: judge).
// `ddp-sim run` knows its scenario: the pipeline's configuration (why a sample was lost), the
// samplers' contracts (equal lengths), a stop and resume on fewer ranks that it emulated, the
// evaluation metric over its labels. A real program's audit has no plan: PlannedRun{}.
// docs/audit.md "One judge".

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ddph/sampler/property.h"

namespace ddph::audit {

/// A finding of the plan's own checks (the scenario's epochs judged by its samplers' contracts).
struct PlannedFinding {
  sampler::Violation violation;
  /// The dataset it is about ("" for the run): an audit finding of the same property naming
  /// that dataset is the same harm.
  std::string dataset;
  /// Its cause and help come from the configuration (zip over loaders of different lengths,
  /// padding in an evaluation): they replace the audit's on the same harm.
  bool causeFromConfiguration = false;
};

/// Ranks that leave the run by plan after `step` of `epoch` (a job stopped and resumed on fewer
/// ranks): their collectives ending there is planned, not a mismatch.
struct PlannedDeparture {
  std::vector<int> ranks;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
};

struct PlannedRun {
  /// The plan's findings. One of a property the audit found too is the same harm, judged once:
  /// the audit's finding stands, with the plan's notes (an evaluation's metric) and, when the
  /// configuration gives it, the plan's cause and help.
  std::vector<PlannedFinding> findings;
  std::vector<std::string> notes;  ///< the plan's facts (an evaluation's metric, a resume)
  std::optional<PlannedDeparture> departure;
  /// Epochs whose data the plan judges itself (a resumed epoch: resume-exactly-once and
  /// resume-balance): the audit's data findings of those epochs give way to the plan's.
  std::set<std::int64_t> epochsJudgedByPlan;
};

}  // namespace ddph::audit
