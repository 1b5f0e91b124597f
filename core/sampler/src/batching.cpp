#include "ddph/sampler/batching.h"

#include <algorithm>

#include "ddph/common/error.h"

namespace ddph::sampler {

std::int64_t numBatches(std::int64_t numIndices, const BatchOptions& options) {
  DDPH_CHECK(options.batchSize > 0, "batch size must be positive, got {}", options.batchSize);
  DDPH_CHECK(numIndices >= 0, "number of indices must be non-negative, got {}", numIndices);
  return options.dropLast ? numIndices / options.batchSize
                          : (numIndices + options.batchSize - 1) / options.batchSize;
}

std::vector<std::vector<Index>> makeBatches(const std::vector<Index>& indices,
                                            const BatchOptions& options) {
  const auto n = static_cast<std::int64_t>(indices.size());
  const std::int64_t count = numBatches(n, options);
  std::vector<std::vector<Index>> batches;
  batches.reserve(static_cast<std::size_t>(count));
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t begin = b * options.batchSize;
    const std::int64_t end = std::min(n, begin + options.batchSize);
    batches.emplace_back(indices.begin() + begin, indices.begin() + end);
  }
  return batches;
}

}  // namespace ddph::sampler
