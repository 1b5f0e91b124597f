#pragma once
// DataLoader-style batching over a rank's indices: torch.utils.data.BatchSampler semantics.

#include <cstdint>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

struct BatchOptions {
  std::int64_t batchSize = 1;
  bool dropLast = false;  ///< drop a last batch shorter than batchSize (DataLoader's drop_last)
};

/// len(DataLoader): ceil(n / b), or floor(n / b) with dropLast.
std::int64_t numBatches(std::int64_t numIndices, const BatchOptions& options);

/// The batches a DataLoader would yield over `indices`, in order.
std::vector<std::vector<Index>> makeBatches(const std::vector<Index>& indices,
                                            const BatchOptions& options);

}  // namespace ddph::sampler
