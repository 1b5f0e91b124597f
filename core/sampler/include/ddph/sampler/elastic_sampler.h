#pragma once
// Elastic resume, exactly once: the one definition of what a rank yields after an epoch was
// stopped on W ranks and resumed on W', and a sampler that does it.
//
// NOTE [Elastic resume]: an epoch's order is PyTorch's (distributedEpochOrder). A run over it
// pads and strides as DistributedSampler does. After every rank of a run on W ranks consumed c
// samples, the first c * W positions of the run are done, and the next run is the run's unpadded
// order from position c * W on: always a suffix of the epoch's order, starting at the sum of the
// earlier runs' c * W. A run on W' ranks pads that suffix with the epoch order's head, tiled, to a
// multiple of W' (or cuts it with drop_last), rank r taking positions r, r + W', ... Padding from
// the epoch's head (not the suffix's) makes W' = W continue the uninterrupted run index for index,
// padding included. Details and the Python twin: docs/elastic-resume.md.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/sampler/distributed_sampler.h"

namespace ddph::sampler {

/// Where the run after `resume` (oldest first) starts in the epoch's order of `datasetSize`
/// samples. Throws ConfigError for a run point that is impossible: num_replicas < 1, or a consumed
/// count below 0 or above what that run yields a rank.
std::int64_t elasticRunStart(std::int64_t datasetSize, const std::vector<ResumePoint>& resume,
                             bool dropLast);

/// What each rank yields in the run of `request` (after request.resume, on request.numReplicas).
std::int64_t elasticNumSamples(const ShardRequest& request, bool dropLast);

/// Rank request.rank's shard of the run after request.resume, over the epoch's `order`.
std::vector<Index> elasticShard(const std::vector<Index>& order, const ShardRequest& request,
                                bool dropLast);

/// "4:3,2:1": the earlier runs as W:consumed, oldest first (`ddp-sim sampler --resume`).
std::string formatResumePoints(const std::vector<ResumePoint>& resume);
/// The inverse of formatResumePoints; throws ConfigError naming the bad part.
std::vector<ResumePoint> parseResumePoints(std::string_view text);

/// What a checkpoint keeps of an elastic sampler, and how a resume reads it back.
struct ElasticState {
  std::int64_t epoch = 0;
  std::int64_t seed = 0;
  std::int64_t numReplicas = 1;  ///< the world size of the run that was stopped
  std::int64_t consumed = 0;     ///< samples each of its ranks consumed
  std::vector<ResumePoint> history;  ///< the runs of this epoch before it, oldest first

  /// The earlier runs of the epoch once resumed from this state: history, then this run.
  std::vector<ResumePoint> resumeHistory() const;
  /// `{"version":1,"epoch":…,"seed":…,"num_replicas":…,"consumed":…,"history":[[W,c],…]}`.
  std::string toJson() const;
  /// Throws ConfigError naming what is wrong with `json`.
  static ElasticState fromJson(std::string_view json);
};

/// DistributedSampler's order with elastic resume: never resumed (request.resume empty) it is
/// DistributedSampler index for index; resumed, it yields elasticShard.
class ElasticSampler final : public Sampler {
 public:
  explicit ElasticSampler(DistributedSamplerOptions options = {});

  std::string name() const override;
  std::vector<Index> indices(const ShardRequest& request) override;
  std::optional<std::int64_t> declaredLength(const ShardRequest& request) override;

 private:
  DistributedSamplerOptions options_;
};

}  // namespace ddph::sampler
