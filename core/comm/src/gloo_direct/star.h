#pragma once
// Private to the direct Gloo engine: the star collectives, through rank 0 (the only rank with a
// pair to every other one): small payloads at any world size, every collective at large ones.

#include <gloo/types.h>

#include <cstddef>
#include <cstdint>

#include "sparse_context.h"

namespace ddph::comm::gloo_direct {

// NOTE [Star for small payloads]: a ring needs 2(W-1) rounds in which every rank runs; a star
// needs every rank to run twice and rank 0 W times. On 2 cores shared by W rank processes the
// number of wake-ups decides, so payloads up to this many bytes (gathered at rank 0) go through
// the star at every W; larger ones (DDP's gradient buckets) use Gloo's ring up to
// starCollectivesAbove ranks, which moves 2(W-1)/W of the data per rank instead of W times it at
// rank 0.
constexpr std::size_t kStarMaxBytes = 64 * 1024;


/// Rank 0 receives every rank's `bytes` at `mine` into `all` (rank r at r * bytes; rank 0's own
/// copied); the others only send. `all` is used on rank 0 only (null: a barrier, where every
/// rank's byte lands on the same one).
void starGather(SparseContext& context, const void* mine, std::size_t bytes, void* all,
                std::uint32_t tag, Clock::time_point deadline);

/// Every rank ends with `root`'s `bytes` at `data`: root sends to rank 0 when it is not rank 0
/// itself, rank 0 sends to every other rank.
void starBroadcast(SparseContext& context, void* data, std::size_t bytes, int root,
                   std::uint32_t tag, Clock::time_point deadline);

}  // namespace ddph::comm::gloo_direct
