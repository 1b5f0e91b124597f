#pragma once
// Private to the scenario library: rank 0's checks at each epoch end, over what every rank
// consumed (gathered): valid range, coverage per dataset, disjointness (with the eval metric's
// skew in the eval phase), equal length and reshuffle against the previous epoch, and a note of
// the samples no rank visited.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddph/scenario/rank_program.h"
#include "rank_sources.h"

namespace ddph {

class EpochChecks {
 public:
  /// `checked` must outlive this object.
  EpochChecks(const Scenario& s, const std::vector<Checked>& checked, std::int64_t world,
              RankObserver& observer);

  /// `gathered[source][rank]`: the ids rank consumed from that source in `epoch`.
  void check(std::int64_t epoch, const std::vector<std::vector<std::vector<Index>>>& gathered);

  /// [resume] (one dataset): `gathered[rank]` holds what the rank took before the stop (its first
  /// `consumed`) and after the resume; judged by resume-exactly-once and resume-balance.
  void checkResumed(std::int64_t epoch, const std::vector<std::vector<Index>>& gathered,
                    std::int64_t consumed);

 private:
  void report(std::optional<Violation> v, const Checked& c);
  void noteUnvisited(const Partition& p, const Checked& info);
  std::string evalMetric(const Partition& p, std::size_t dataset) const;

  const Scenario& s_;
  const std::vector<Checked>& checked_;
  std::int64_t world_;
  RankObserver& observer_;
  std::vector<std::optional<Partition>> previous_;  ///< per checked dataset, the last epoch
};

}  // namespace ddph
