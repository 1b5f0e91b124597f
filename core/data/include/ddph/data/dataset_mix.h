#pragma once
// Training on several datasets at once, each with its own DistributedSampler: how one rank's
// epoch is cut into steps, and the per-dataset accounting that makes zip's truncation visible.
//
// Each dataset's shard (the rank's sampler indices for the epoch) is cut into batches of
// `batchSize` (the last one may be short). The mix decides which batches form each step:
//   zip    — step s takes batch s of every dataset; the epoch ends with the shortest dataset
//            (Python's zip(loader1, loader2)): the longer datasets' remaining samples are never seen.
//   cycle  — the epoch runs as long as the longest dataset; a shorter dataset starts over from its
//            first batch when exhausted (zip(loader_long, itertools.cycle(loader_short))).
//   concat — every batch of dataset 0, then every batch of dataset 1, … (itertools.chain): each
//            step holds one dataset only.
// With one dataset every mix is the same plain epoch.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::data {

enum class Mix { kZip, kCycle, kConcat };

/// "zip", "cycle", "concat"; throws ConfigError naming the accepted values otherwise.
Mix parseMix(std::string_view name);
std::string mixName(Mix mix);

/// One training step of one rank: batches[d] are dataset d's sample indices in this step (empty
/// when dataset d takes no part in it).
struct MixedStep {
  std::vector<std::vector<sampler::Index>> batches;
};

/// One rank's epoch. `shards[d]` is dataset d's shard for this rank and epoch; batchSize > 0.
std::vector<MixedStep> planEpoch(const std::vector<std::vector<sampler::Index>>& shards,
                                 std::int64_t batchSize, Mix mix);

/// How often each sample of one dataset was visited during an epoch, summed over ranks.
class VisitCounter {
 public:
  explicit VisitCounter(std::int64_t datasetSize);
  void visit(const std::vector<sampler::Index>& batch);  ///< throws Error for an index out of range
  std::vector<std::int64_t>& counts() { return counts_; }  ///< allreduce(sum) these across ranks
  const std::vector<std::int64_t>& counts() const { return counts_; }
  void reset();

 private:
  std::vector<std::int64_t> counts_;
};

/// The summary an epoch report prints per dataset.
struct VisitSummary {
  std::int64_t datasetSize = 0;
  std::int64_t visits = 0;           ///< samples served, duplicates included
  std::int64_t seen = 0;             ///< distinct samples visited at least once
  std::int64_t neverSeen = 0;        ///< datasetSize - seen
  std::int64_t seenMoreThanOnce = 0; ///< distinct samples visited twice or more (padding, cycle)
};
VisitSummary summarize(const std::vector<std::int64_t>& counts);

}  // namespace ddph::data
