#pragma once
// Private to the scenario library: the checks of each epoch every rank completed, over what every
// rank consumed (read from the run's trace: scenario_plan.h): valid range, coverage per dataset,
// disjointness (in the eval phase no-duplicates, with the eval metric's skew), equal length and
// reshuffle against the previous epoch, and a note of the samples no rank visited.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddph/audit/planned_run.h"
#include "ddph/scenario/scenario.h"
#include "ddph/sampler/partition_checks.h"
#include "ddph/sampler/property.h"
#include "pipeline_hints.h"
#include "rank_sources.h"

namespace ddph::scenario {

class EpochChecks {
 public:
  /// `checked` and `out` must outlive this object; what the checks find is added to `out` as the
  /// plan's findings, and the facts worth showing (the eval metric, unvisited samples per
  /// dataset) as its notes.
  EpochChecks(const Scenario& s, const std::vector<Checked>& checked, std::int64_t world,
              audit::PlannedRun& out);

  /// `gathered[source][rank]`: the ids rank consumed from that source in `epoch`.
  void check(std::int64_t epoch,
             const std::vector<std::vector<std::vector<sampler::Index>>>& gathered);

  /// What the pipeline's configuration explains: each hint becomes the likely cause and help of
  /// the violations of its property on its dataset.
  void explainWith(std::vector<PipelineHint> hints) { hints_ = std::move(hints); }

  /// [resume] (one dataset): `gathered[rank]` holds what the rank took before the stop (its first
  /// `consumed`) and after the resume; judged by resume-exactly-once and resume-balance.
  void checkResumed(std::int64_t epoch, const std::vector<std::vector<sampler::Index>>& gathered,
                    std::int64_t consumed);

 private:
  void report(std::optional<sampler::Violation> v, const Checked& c);
  void noteUnvisited(const sampler::Partition& p, const Checked& info);
  std::string evalMetric(const sampler::Partition& p, std::size_t dataset) const;

  const Scenario& s_;
  const std::vector<Checked>& checked_;
  std::int64_t world_;
  audit::PlannedRun& out_;
  std::vector<PipelineHint> hints_;
  std::vector<std::optional<sampler::Partition>> previous_;  ///< per checked dataset, last epoch
};

}  // namespace ddph::scenario
