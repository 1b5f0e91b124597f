#pragma once
// The elastic-resume properties (resume-exactly-once, resume-order, resume-balance), defined once
// over the runs of one resumed epoch as a sampler answered them (NOTE [Elastic resume]).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ddph/sampler/partition_checks.h"

namespace ddph::sampler {

/// One epoch stopped and resumed, as a sampler answered it.
struct ResumedEpoch {
  SamplerCase last;              ///< the run after every earlier one (last.resume lists them)
  std::vector<Partition> runs;   ///< runs[k]: the run after last.resume[:k]; the last is `last`'s
  Partition fresh;               ///< the epoch from its start on last.numReplicas (never resumed)
};

/// Whether `name` is one of the three resume properties.
bool isResumeProperty(std::string_view name);

/// Asks `sampler` for every run of `c`'s epoch (c.resume.size() + 1 partitions) and for the
/// never-resumed one on the same world size.
ResumedEpoch askResumedEpoch(Sampler& sampler, const SamplerCase& c);

/// The samples each earlier run consumed (the first `consumed` of every rank) and everything the
/// last run yields cover [0, N) exactly once, apart from the padding of the run that reached the
/// end (or, with drop_last, its cut). Holds vacuously for a case never resumed.
std::optional<Violation> checkResumeExactlyOnce(const ResumedEpoch& e, const Expectations& x);

/// The last run's ranks yield equal numbers of samples.
std::optional<Violation> checkResumeBalance(const ResumedEpoch& e);

/// `resumed` (the run after every rank of `whole`'s world consumed `consumed`, on the same world)
/// continues `whole` index for index: resumed.ranks[r] == whole.ranks[r][consumed:].
std::optional<Violation> checkResumeOrder(const Partition& whole, const Partition& resumed,
                                          std::int64_t consumed);

}  // namespace ddph::sampler
