#pragma once
// The sampler interface: what every distributed sampler looks like to ddp-harness.
//
// A distributed sampler is treated as a pure function of a ShardRequest (dataset size, number of
// replicas, rank, epoch, seed) to the list of sample indices that rank visits, in order. The same
// question for every rank at once is a SamplerCase (N, W, epoch, seed), answered by a Partition. PyTorch's
// DistributedSampler, LibTorch's C++ samplers, users' C++ samplers and samplers in other languages
// (over the line protocol of `ddp-sim check-sampler`) all implement it, so one set of properties
// judges them all.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddph::sampler {

using Index = std::int64_t;

struct ShardRequest;

/// An earlier run of the current epoch, before a resume: its world size and how many samples each
/// of its ranks consumed (NOTE [Elastic resume], docs/elastic-resume.md).
struct ResumePoint {
  std::int64_t numReplicas = 1;
  std::int64_t consumed = 0;
  bool operator==(const ResumePoint& o) const {
    return numReplicas == o.numReplicas && consumed == o.consumed;
  }
};

/// One configuration of a distributed sampler for one epoch, (N, W, epoch, seed): the point a
/// property is checked at, and what partition() answers for every rank.
struct SamplerCase {
  std::int64_t datasetSize = 0;
  std::int64_t numReplicas = 1;
  std::int64_t epoch = 0;
  std::int64_t seed = 0;
  /// The earlier runs of this epoch, oldest first; empty: the epoch runs from its start.
  std::vector<ResumePoint> resume;

  /// The question rank `rank` puts to the sampler in this case.
  ShardRequest forRank(std::int64_t rank) const;
};

/// One rank's question to a distributed sampler. Field names follow the line protocol
/// (`{"dataset_size":N,"num_replicas":W,"rank":R,"epoch":E,"seed":S}`).
struct ShardRequest {
  std::int64_t datasetSize = 0;
  std::int64_t numReplicas = 1;
  std::int64_t rank = 0;
  std::int64_t epoch = 0;
  std::int64_t seed = 0;
  /// The earlier runs of this epoch, oldest first (the line protocol's "resume"): the answer is
  /// what the rank yields in the run after the last of them. A sampler without elastic resume
  /// ignores it and restarts the epoch, as DistributedSampler does.
  std::vector<ResumePoint> resume;

  bool operator==(const ShardRequest& o) const {
    return datasetSize == o.datasetSize && numReplicas == o.numReplicas && rank == o.rank &&
           epoch == o.epoch && seed == o.seed && resume == o.resume;
  }
};

inline ShardRequest SamplerCase::forRank(std::int64_t rank) const {
  return {datasetSize, numReplicas, rank, epoch, seed, resume};
}

/// Every rank's indices for one SamplerCase.
struct Partition {
  std::int64_t datasetSize = 0;
  std::int64_t epoch = 0;
  std::int64_t seed = 0;
  /// ranks[r] holds the indices rank r visits, in order.
  std::vector<std::vector<Index>> ranks;
  /// declaredLengths[r] is what rank r's sampler says its length is (`len(sampler)`); empty when
  /// the sampler declares no length.
  std::vector<std::int64_t> declaredLengths;

  std::int64_t numReplicas() const { return static_cast<std::int64_t>(ranks.size()); }
  /// An empty partition of case `c` (no ranks yet).
  static Partition of(const SamplerCase& c) {
    Partition p;
    p.datasetSize = c.datasetSize;
    p.epoch = c.epoch;
    p.seed = c.seed;
    return p;
  }
};

/// A distributed sampler. Implementations need not be thread-safe: callers serialise calls.
class Sampler {
 public:
  virtual ~Sampler() = default;

  /// Short name used in reports ("pytorch", "libtorch-random", the user's command, …).
  virtual std::string name() const = 0;

  /// The indices `request.rank` visits, in order. Throws ddph::common::ConfigError for requests the
  /// sampler rejects (rank out of range, …) and ddph::common::ProtocolError when an external
  /// sampler fails.
  virtual std::vector<Index> indices(const ShardRequest& request) = 0;

  /// What the sampler says the rank's length is (`len(sampler)`), if it declares one.
  virtual std::optional<std::int64_t> declaredLength(const ShardRequest& request);

  /// Every rank's indices. The default asks each rank in turn; samplers that can share work
  /// between ranks (one permutation for all of them) override it.
  virtual Partition partition(const SamplerCase& c);
};

/// A single rank's view of a Sampler, shaped like PyTorch's: fixed dataset size, replicas, rank
/// and seed; `setEpoch` before each epoch; `indices()` for the current epoch.
class RankSampler {
 public:
  RankSampler(Sampler& sampler, std::int64_t datasetSize, std::int64_t numReplicas,
              std::int64_t rank, std::int64_t seed = 0);

  void setEpoch(std::int64_t epoch) { request_.epoch = epoch; }
  std::int64_t epoch() const { return request_.epoch; }
  std::vector<Index> indices() { return sampler_.indices(request_); }
  const ShardRequest& request() const { return request_; }

 private:
  Sampler& sampler_;
  ShardRequest request_;
};

}  // namespace ddph::sampler
