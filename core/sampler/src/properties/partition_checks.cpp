#include "ddph/sampler/partition_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ddph/sampler/distributed_sampler.h"

namespace ddph::sampler {
namespace {

Violation violation(std::string_view property, const Partition& p, std::string detail,
                    std::vector<std::int64_t> ranks = {}) {
  Violation v;
  v.property = std::string(property);
  v.epoch = p.epoch;
  v.ranks = std::move(ranks);
  v.detail = std::move(detail);
  return v;
}

bool allInRange(const Partition& p) { return !checkValidRange(p).has_value(); }

// How often each index of [0, N) occurs across all ranks (saturating at 255).
std::vector<std::uint8_t> occurrences(const Partition& p) {
  std::vector<std::uint8_t> count(static_cast<std::size_t>(p.datasetSize), 0);
  for (const auto& shard : p.ranks) {
    for (Index i : shard) {
      if (count[i] != 255) ++count[i];
    }
  }
  return count;
}

std::vector<std::int64_t> ranksHolding(const Partition& p, Index index) {
  std::vector<std::int64_t> ranks;
  for (std::int64_t r = 0; r < p.numReplicas(); ++r) {
    const auto& shard = p.ranks[r];
    if (std::find(shard.begin(), shard.end(), index) != shard.end()) ranks.push_back(r);
  }
  return ranks;
}

std::string firstFew(const std::vector<Index>& values, std::size_t limit = 8) {
  if (values.size() <= limit) return fmt::format("{}", fmt::join(values, ", "));
  return fmt::format("{}, … ({} in all)",
                     fmt::join(values.begin(), values.begin() + static_cast<long>(limit), ", "),
                     values.size());
}

// The first rank whose declared length (len(sampler)) is not the number of indices it yields.
std::optional<Violation> declaredLengthMismatch(const Partition& p, std::string_view property) {
  const std::int64_t w = p.numReplicas();
  for (std::int64_t r = 0; r < w && r < static_cast<std::int64_t>(p.declaredLengths.size()); ++r) {
    const auto length = static_cast<std::int64_t>(p.ranks[r].size());
    if (p.declaredLengths[r] != length) {
      return violation(property, p,
                       fmt::format("rank {} declares length {} but yields {} indices", r,
                                   p.declaredLengths[r], length),
                       {r});
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<Index> interleave(const Partition& p) {
  const std::int64_t w = p.numReplicas();
  if (w == 0) return {};
  const std::size_t length = p.ranks[0].size();
  for (const auto& shard : p.ranks) {
    if (shard.size() != length) return {};
  }
  std::vector<Index> order(length * static_cast<std::size_t>(w));
  for (std::int64_t r = 0; r < w; ++r) {
    for (std::size_t k = 0; k < length; ++k) order[k * w + r] = p.ranks[r][k];
  }
  return order;
}

std::optional<Violation> checkValidRange(const Partition& p) {
  for (std::int64_t r = 0; r < p.numReplicas(); ++r) {
    const auto& shard = p.ranks[r];
    for (std::size_t k = 0; k < shard.size(); ++k) {
      if (shard[k] < 0 || shard[k] >= p.datasetSize) {
        return violation(property::kValidRange, p,
                         fmt::format("rank {} yields index {} at position {}, outside [0, {})", r,
                                     shard[k], k, p.datasetSize),
                         {r});
      }
    }
  }
  return std::nullopt;
}

std::optional<Violation> checkEqualLength(const Partition& p, const Expectations& e) {
  const std::int64_t w = p.numReplicas();
  if (auto v = declaredLengthMismatch(p, property::kEqualLength)) return v;
  for (std::int64_t r = 1; r < w; ++r) {
    if (p.ranks[r].size() != p.ranks[0].size()) {
      return violation(property::kEqualLength, p,
                       fmt::format("rank 0 yields {} indices but rank {} yields {}",
                                   p.ranks[0].size(), r, p.ranks[r].size()),
                       {0, r});
    }
  }
  if (e.pytorchLengths && w > 0) {
    const std::int64_t expected = distributedNumSamples(p.datasetSize, w, e.dropLast);
    const auto length = static_cast<std::int64_t>(p.ranks[0].size());
    if (length != expected) {
      return violation(property::kEqualLength, p,
                       fmt::format("every rank yields {} indices; N = {} on {} ranks{} needs {}",
                                   length, p.datasetSize, w, e.dropLast ? " with drop_last" : "",
                                   expected));
    }
  }
  return std::nullopt;
}

std::optional<Violation> checkCoverage(const Partition& p, const Expectations& e) {
  if (!allInRange(p) || p.numReplicas() == 0) return std::nullopt;  // valid-range reports it
  const auto count = occurrences(p);
  std::vector<Index> missing;
  for (Index i = 0; i < p.datasetSize; ++i) {
    if (count[i] == 0) missing.push_back(i);
  }
  if (!e.dropLast) {
    if (missing.empty()) return std::nullopt;
    return violation(property::kCoverage, p,
                     fmt::format("{} of {} indices are on no rank: {}", missing.size(),
                                 p.datasetSize, firstFew(missing)));
  }
  // drop_last keeps exactly total_size distinct indices and drops the other N - total_size.
  const std::int64_t kept = distributedTotalSize(p.datasetSize, p.numReplicas(), true);
  const auto covered = p.datasetSize - static_cast<std::int64_t>(missing.size());
  if (covered == kept) return std::nullopt;
  return violation(property::kCoverage, p,
                   fmt::format("with drop_last the ranks should visit {} distinct indices of {}, "
                               "they visit {} (missing: {})",
                               kept, p.datasetSize, covered, firstFew(missing)));
}

std::optional<Violation> checkDisjointness(const Partition& p, const Expectations& e) {
  if (!allInRange(p) || p.numReplicas() == 0) return std::nullopt;
  const std::int64_t totalSize = distributedTotalSize(p.datasetSize, p.numReplicas(), e.dropLast);
  const std::int64_t allowed =
      e.allowPadding ? std::max<std::int64_t>(0, totalSize - p.datasetSize) : 0;
  std::int64_t yielded = 0;
  for (const auto& shard : p.ranks) yielded += static_cast<std::int64_t>(shard.size());
  const auto count = occurrences(p);
  std::int64_t distinct = 0;
  Index firstDuplicate = -1;
  for (Index i = 0; i < p.datasetSize; ++i) {
    if (count[i] > 0) ++distinct;
    if (count[i] > 1 && firstDuplicate < 0) firstDuplicate = i;
  }
  const std::int64_t extra = yielded - distinct;
  if (extra <= allowed) return std::nullopt;
  const auto holders = ranksHolding(p, firstDuplicate);
  return violation(property::kDisjointness, p,
                   e.allowPadding
                       ? fmt::format("{} extra copies across ranks where padding allows {} "
                                     "(total_size {} - N {}); index {} is on ranks {}",
                                     extra, allowed, totalSize, p.datasetSize, firstDuplicate,
                                     fmt::join(holders, ", "))
                       : fmt::format("{} extra copies across ranks where every sample must be "
                                     "seen once; index {} is on ranks {}",
                                     extra, firstDuplicate, fmt::join(holders, ", ")),
                   holders);
}

std::optional<Violation> checkPadding(const Partition& p, const Expectations& e) {
  if (e.dropLast || p.datasetSize == 0 || !allInRange(p)) return std::nullopt;
  const auto order = interleave(p);
  if (order.empty()) return std::nullopt;  // unequal lengths: equal-length reports it
  const std::int64_t n = p.datasetSize;
  const std::int64_t w = p.numReplicas();
  for (std::int64_t pos = n; pos < static_cast<std::int64_t>(order.size()); ++pos) {
    const Index expected = order[(pos - n) % n];
    if (order[pos] != expected) {
      return violation(property::kPadding, p,
                       fmt::format("padding slot {} (rank {}, position {}) holds {}, expected {} "
                                   "(the head of the epoch's order, tiled)",
                                   pos - n, pos % w, pos / w, order[pos], expected),
                       {pos % w});
    }
  }
  return std::nullopt;
}

std::optional<Violation> checkReshuffle(const Partition& p, const Partition& next,
                                        const Expectations& e) {
  if (!allInRange(p)) return std::nullopt;  // valid-range reports it
  const auto order = interleave(p);
  const auto nextOrder = interleave(next);
  if (order.empty() && p.datasetSize > 0) return std::nullopt;  // equal-length reports it
  const auto prefix = std::min<std::size_t>(order.size(), static_cast<std::size_t>(p.datasetSize));
  if (!e.shuffle) {
    for (std::size_t k = 0; k < prefix; ++k) {
      if (order[k] != static_cast<Index>(k)) {
        return violation(property::kReshuffle, p,
                         fmt::format("without shuffle the order should be 0..N-1, position {} "
                                     "(rank {}) holds {}",
                                     k, k % p.numReplicas(), order[k]),
                         {static_cast<std::int64_t>(k % p.numReplicas())});
      }
    }
    return std::nullopt;
  }
  if (p.datasetSize < kReshuffleMinDatasetSize || nextOrder.size() != order.size()) {
    return std::nullopt;
  }
  if (std::equal(order.begin(), order.begin() + static_cast<long>(prefix), nextOrder.begin())) {
    return violation(property::kReshuffle, p,
                     fmt::format("epochs {} and {} give the same order of {} samples (seed {}): "
                                 "the epoch does not reach the shuffle",
                                 p.epoch, next.epoch, p.datasetSize, p.seed));
  }
  return std::nullopt;
}

std::optional<Violation> checkDeterminism(const Partition& p, const Partition& again) {
  for (std::int64_t r = 0; r < p.numReplicas() && r < again.numReplicas(); ++r) {
    if (p.ranks[r] != again.ranks[r]) {
      return violation(property::kDeterminism, p,
                       fmt::format("asked twice for rank {} at seed {} epoch {}, the sampler "
                                   "answered two different lists",
                                   r, p.seed, p.epoch),
                       {r});
    }
  }
  return std::nullopt;
}

std::optional<Violation> checkSeedPlusEpoch(const Partition& p, const Partition& shifted) {
  for (std::int64_t r = 0; r < p.numReplicas() && r < shifted.numReplicas(); ++r) {
    if (p.ranks[r] != shifted.ranks[r]) {
      return violation(property::kSeedPlusEpoch, p,
                       fmt::format("seed {} epoch {} and seed {} epoch {} have the same seed + "
                                   "epoch but rank {} gets different indices",
                                   p.seed, p.epoch, shifted.seed, shifted.epoch, r),
                       {r});
    }
  }
  return std::nullopt;
}

std::optional<Violation> checkNoDuplicates(const Partition& p) {
  if (!allInRange(p) || p.numReplicas() == 0) return std::nullopt;  // valid-range reports it
  const auto count = occurrences(p);
  for (Index i = 0; i < p.datasetSize; ++i) {
    if (count[i] > 1) {
      const auto holders = ranksHolding(p, i);
      return violation(property::kNoDuplicates, p,
                       fmt::format("index {} is yielded {}{} times, by rank{} {}", i,
                                   count[i] == 255 ? "at least " : "", count[i],
                                   holders.size() == 1 ? "" : "s", fmt::join(holders, ", ")),
                       holders);
    }
  }
  return std::nullopt;
}

std::optional<Violation> checkBalancedLength(const Partition& p) {
  const std::int64_t w = p.numReplicas();
  if (w == 0) return std::nullopt;
  if (auto v = declaredLengthMismatch(p, property::kBalancedLength)) return v;
  std::int64_t shortest = 0, longest = 0;
  for (std::int64_t r = 1; r < w; ++r) {
    if (p.ranks[r].size() < p.ranks[shortest].size()) shortest = r;
    if (p.ranks[r].size() > p.ranks[longest].size()) longest = r;
  }
  if (p.ranks[longest].size() <= p.ranks[shortest].size() + 1) return std::nullopt;
  return violation(property::kBalancedLength, p,
                   fmt::format("rank {} yields {} indices but rank {} yields {}: more than one apart",
                               shortest, p.ranks[shortest].size(), longest,
                               p.ranks[longest].size()),
                   {std::min(shortest, longest), std::max(shortest, longest)});
}

std::optional<Violation> checkRanksAgree(const Partition& p) {
  if (p.datasetSize < 2) return std::nullopt;
  const double bitsPerIndex = std::log2(static_cast<double>(p.datasetSize));
  for (std::int64_t r = 0; r < p.numReplicas(); ++r) {
    const auto& shard = p.ranks[r];
    if (static_cast<double>(shard.size()) * bitsPerIndex < kRanksAgreeMinBits) continue;
    for (std::int64_t s = r + 1; s < p.numReplicas(); ++s) {
      if (p.ranks[s] == shard) {
        return violation(property::kRanksAgree, p,
                         fmt::format("ranks {} and {} yield the same {} indices ({}): they do "
                                     "not split the epoch's draw",
                                     r, s, shard.size(), firstFew(shard)),
                         {r, s});
      }
    }
  }
  return std::nullopt;
}

}  // namespace ddph::sampler
