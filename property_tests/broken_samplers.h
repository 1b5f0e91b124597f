#pragma once
// Deliberately broken distributed samplers: the negative controls of the property suite.
//
// Each one is PyTorch's DistributedSampler with one classic bug, and each is paired with the
// property that must catch it (kBrokenSamplers). The suite asserts that RapidCheck finds a
// counterexample for that property and shrinks it to a small case, which shows that every
// property can fail.

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ddph/sampler/property.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::sampler::testing {

/// A DistributedSampler whose shard computation is replaced by `shard`, which gets the request
/// (possibly altered) and the epoch order PyTorch would build.
class BrokenSampler final : public Sampler {
 public:
  using ShardFn = std::function<std::vector<Index>(const ShardRequest&, int callNumber)>;
  BrokenSampler(std::string name, ShardFn shard, std::function<std::int64_t(const ShardRequest&)> length = {})
      : name_(std::move(name)), shard_(std::move(shard)), length_(std::move(length)) {}

  std::string name() const override { return name_; }
  std::vector<Index> indices(const ShardRequest& request) override {
    validateShardRequest(request);
    return shard_(request, calls_++);
  }
  std::optional<std::int64_t> declaredLength(const ShardRequest& request) override {
    if (length_) return length_(request);
    return distributedNumSamples(request.datasetSize, request.numReplicas, false);
  }

 private:
  std::string name_;
  ShardFn shard_;
  std::function<std::int64_t(const ShardRequest&)> length_;
  int calls_ = 0;
};

inline std::vector<Index> pytorchOrder(const ShardRequest& r) {
  return distributedEpochOrder(r.datasetSize, r.seed, r.epoch, DistributedSamplerOptions{});
}

inline std::vector<Index> pytorchShard(const ShardRequest& r) {
  return distributedShard(pytorchOrder(r), r, false);
}

struct BrokenCase {
  std::string name;
  std::string_view caughtBy;  ///< the property that must catch it
  std::function<std::unique_ptr<Sampler>()> make;
  /// Every property of distributedSamplerPropertyNames() it breaks (caughtBy among them), each
  /// with words its minimal violation's detail must hold; the others must hold for it.
  std::map<std::string, std::string> breaks;
};

inline void PrintTo(const BrokenCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<BrokenCase> brokenSamplers() {
  using P = BrokenSampler;
  return {
      {"forgotten-set-epoch", property::kReshuffle,
       [] {
         return std::make_unique<P>("forgotten-set-epoch", [](ShardRequest r, int) {
           r.epoch = 0;  // set_epoch never called
           return pytorchShard(r);
         });
       },
       {{"reshuffle", "the epoch does not reach the shuffle"},
        {"seed-plus-epoch", "have the same seed + epoch but rank 0 gets different indices"}}},
      {"per-rank-seed", property::kDisjointness,
       [] {
         return std::make_unique<P>("per-rank-seed", [](ShardRequest r, int) {
           r.seed += r.rank;  // torch.manual_seed(base + rank) before building the sampler
           return pytorchShard(r);
         });
       },
       {{"coverage", "indices are on no rank"},
        {"disjointness", "extra copies across ranks where padding allows 0"},
        {"padding", "(the head of the epoch's order, tiled)"}}},
      {"off-by-one-padding", property::kPadding,
       [] {
         return std::make_unique<P>("off-by-one-padding", [](const ShardRequest& r, int) {
           // Pads with order[1:] instead of order[:padding].
           const auto order = pytorchOrder(r);
           const std::int64_t n = r.datasetSize;
           std::vector<Index> shard;
           const std::int64_t total = distributedTotalSize(n, r.numReplicas, false);
           for (std::int64_t p = r.rank; p < total; p += r.numReplicas) {
             shard.push_back(p < n ? order[p] : order[(p - n + 1) % n]);
           }
           return shard;
         });
       },
       {{"padding", "holds 1, expected 0"}}},
      {"contiguous-split-padded-past-n", property::kValidRange,
       [] {
         return std::make_unique<P>("contiguous-split-padded-past-n", [](const ShardRequest& r, int) {
           // Rank r takes positions [r * L, (r + 1) * L) and pads with the positions themselves.
           const auto order = pytorchOrder(r);
           const std::int64_t length = distributedNumSamples(r.datasetSize, r.numReplicas, false);
           std::vector<Index> shard;
           for (std::int64_t p = r.rank * length; p < (r.rank + 1) * length; ++p) {
             shard.push_back(p < r.datasetSize ? order[p] : p);
           }
           return shard;
         });
       },
       {{"valid-range", "rank 1 yields index 1 at position 0, outside [0, 1)"}}},
      {"no-padding", property::kEqualLength,
       [] {
         return std::make_unique<P>(
             "no-padding",
             [](const ShardRequest& r, int) {
               // order[rank::W] without padding: the last ranks get one index fewer.
               const auto order = pytorchOrder(r);
               std::vector<Index> shard;
               for (std::int64_t p = r.rank; p < r.datasetSize; p += r.numReplicas) shard.push_back(order[p]);
               return shard;
             },
             [](const ShardRequest& r) { return distributedNumSamples(r.datasetSize, r.numReplicas, false); });
       },
       {{"equal-length", "rank 1 declares length 1 but yields 0 indices"}}},
      {"loses-last-sample", property::kCoverage,
       [] {
         return std::make_unique<P>("loses-last-sample", [](const ShardRequest& r, int) {
           // The order is built over N - 1 samples (an off-by-one in len(dataset)), then padded.
           auto order = pytorchOrder(r);
           const std::int64_t n = r.datasetSize;
           std::vector<Index> shard;
           const std::int64_t total = distributedTotalSize(n, r.numReplicas, false);
           const std::int64_t m = n - 1;
           for (std::int64_t p = r.rank; p < total; p += r.numReplicas) {
             shard.push_back(m <= 0 ? order[0] : (p < m ? order[p] : order[(p - m) % m]));
           }
           return shard;
         });
       },
       {{"coverage", "indices are on no rank"},
        {"disjointness", "extra copies across ranks where padding allows 0"},
        {"padding", "(the head of the epoch's order, tiled)"}}},
      {"global-generator", property::kDeterminism,
       [] {
         return std::make_unique<P>("global-generator", [](ShardRequest r, int call) {
           // Shuffles with a generator that keeps advancing between calls.
           r.seed += 1000 * (call + 1);
           return pytorchShard(r);
         });
       },
       {{"coverage", "indices are on no rank"},
        {"disjointness", "extra copies across ranks where padding allows 0"},
        {"padding", "(the head of the epoch's order, tiled)"},
        {"determinism", "the sampler answered two different lists"},
        {"seed-plus-epoch", "have the same seed + epoch but rank 0 gets different indices"}}},
      {"seed-ignored", property::kSeedPlusEpoch,
       [] {
         return std::make_unique<P>("seed-ignored", [](ShardRequest r, int) {
           r.seed = 0;  // the user's seed never reaches the generator
           return pytorchShard(r);
         });
       },
       {{"seed-plus-epoch", "have the same seed + epoch but rank 0 gets different indices"}}},
      {"wrong-declared-length", property::kEqualLength,
       [] {
         return std::make_unique<P>(
             "wrong-declared-length", [](const ShardRequest& r, int) { return pytorchShard(r); },
             [](const ShardRequest& r) { return r.datasetSize / r.numReplicas; });  // floor, not ceil
       },
       {{"equal-length", "rank 0 declares length 0 but yields 1 indices"}}},
  };
}

}  // namespace ddph::sampler::testing
