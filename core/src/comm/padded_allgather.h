#pragma once
// Allgather of vectors of different lengths through a gather of equal-length blocks (what Gloo's
// allgather needs): each rank pads its vector to the longest agreed length, the blocks are
// gathered, and each rank's block is cut back to its length. Shared by both Gloo engines; the
// length check is shared with the NCCL communicator. Private to core/src/comm.

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ddph/common/error.h"

namespace ddph::comm_detail {

/// Every rank passes the same `lengths` (one per rank), and this rank's entry is mine's length.
inline void checkAgreedLengths(const std::vector<std::int64_t>& lengths, int rank, int size,
                               std::size_t mineSize, std::string_view step) {
  DDPH_CHECK(static_cast<int>(lengths.size()) == size &&
                 lengths[static_cast<std::size_t>(rank)] == static_cast<std::int64_t>(mineSize),
             "allgather at {}: rank {} passes {} values but the agreed lengths say {}", step, rank,
             mineSize,
             lengths.size() > static_cast<std::size_t>(rank) ? lengths[static_cast<std::size_t>(rank)]
                                                             : -1);
}

/// `gatherFixed(block, step)` returns every rank's equal-length block, concatenated in rank order.
template <typename GatherFixed>
std::vector<std::vector<std::int64_t>> paddedAllgather(const std::vector<std::int64_t>& mine,
                                                       const std::vector<std::int64_t>& lengths,
                                                       int rank, int size, std::string_view step,
                                                       GatherFixed&& gatherFixed) {
  checkAgreedLengths(lengths, rank, size, mine.size(), step);
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::int64_t> padded(mine);
  padded.resize(static_cast<std::size_t>(std::max<std::int64_t>(longest, 1)), 0);
  const std::size_t stride = padded.size();
  const std::vector<std::int64_t> flat = gatherFixed(std::move(padded), step);
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(size));
  for (std::size_t r = 0; r < out.size(); ++r) {
    const auto begin = flat.begin() + static_cast<long>(r * stride);
    out[r].assign(begin, begin + lengths[r]);
  }
  return out;
}

/// The same when the lengths are not known yet: they are gathered first (one more collective).
template <typename GatherFixed>
std::vector<std::vector<std::int64_t>> paddedAllgather(const std::vector<std::int64_t>& mine,
                                                       int rank, int size, std::string_view step,
                                                       GatherFixed&& gatherFixed) {
  const std::vector<std::int64_t> lengths =
      gatherFixed(std::vector<std::int64_t>{static_cast<std::int64_t>(mine.size())}, step);
  return paddedAllgather(mine, lengths, rank, size, step, gatherFixed);
}

}  // namespace ddph::comm_detail
