#pragma once
// Each sampler property, defined once, over the partitions it is about.
//
// These functions serve all three users of the properties: the RapidCheck suite (partitions made
// by a sampler under test), `ddp-sim check-sampler` (partitions answered by a user's sampler) and
// the simulator (partitions all-gathered from the indices real ranks consumed). Each returns the
// first violation it finds, or nothing.

#include <cstdint>
#include <optional>

#include "ddph/sampler/property.h"
#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

/// What a sampler promises beyond the properties themselves.
struct Expectations {
  bool dropLast = false;  ///< shards are cut to floor(N / W) instead of padded to ceil(N / W)
  bool shuffle = true;    ///< the order is a fresh permutation each epoch (else 0..N-1)
  /// Shard lengths follow PyTorch's num_samples formula (not just equal to each other).
  bool pytorchLengths = true;
  /// Padding copies are allowed (training). Evaluation needs every sample exactly once: false
  /// makes every extra copy a disjointness violation.
  bool allowPadding = true;
};

/// Below this dataset size two epochs may legitimately draw the same permutation
/// (1 / N! >= 1 / 12! ~ 2e-9 is tolerated), so `reshuffle` is not asserted for shuffled orders.
inline constexpr std::int64_t kReshuffleMinDatasetSize = 12;

std::optional<Violation> checkValidRange(const Partition& p);
std::optional<Violation> checkEqualLength(const Partition& p, const Expectations& e);
std::optional<Violation> checkCoverage(const Partition& p, const Expectations& e);
std::optional<Violation> checkDisjointness(const Partition& p, const Expectations& e);
std::optional<Violation> checkPadding(const Partition& p, const Expectations& e);
/// `next` is the partition of the epoch after `p`'s, same seed and world.
std::optional<Violation> checkReshuffle(const Partition& p, const Partition& next,
                                        const Expectations& e);
/// `again` is the same request asked a second time.
std::optional<Violation> checkDeterminism(const Partition& p, const Partition& again);
/// `shifted` is the partition for (seed + 1, epoch - 1), which PyTorch's seeding (seed + epoch)
/// makes identical to `p`.
std::optional<Violation> checkSeedPlusEpoch(const Partition& p, const Partition& shifted);

/// Every index at most once over all ranks (evaluation sharding).
std::optional<Violation> checkNoDuplicates(const Partition& p);
/// Shard lengths within one of each other, and equal to the declared lengths.
std::optional<Violation> checkBalancedLength(const Partition& p);
/// No two ranks yield the same shard, where a chance match is negligible (see
/// kRanksAgreeMinBits): ranks that draw with replacement must still split one draw.
std::optional<Violation> checkRanksAgree(const Partition& p);

/// `ranks-agree` is asserted only for shards of L indices from N with L * log2(N) >= this: two
/// independent uniform draws then match with probability <= 2^-40.
inline constexpr double kRanksAgreeMinBits = 40.0;

/// The global order a strided sampler implies: position k * W + r holds ranks[r][k]. Defined only
/// when all ranks have the same length (else empty).
std::vector<Index> interleave(const Partition& p);

}  // namespace ddph::sampler
