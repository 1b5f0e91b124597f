#include "ddph/properties/property.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ddph {

const std::vector<PropertyInfo>& samplerProperties() {
  static const std::vector<PropertyInfo> kProperties = {
      {property::kValidRange, "every index is in [0, N)",
       "the sampler pads or splits past the end of the dataset; pad with indices of the dataset "
       "(PyTorch repeats the head of the order)"},
      {property::kEqualLength,
       "every rank yields the same number of indices, equal to its declared length",
       "uneven shards make ranks run different numbers of steps and the job hangs in a collective; "
       "pad to ceil(N / W) per rank or use drop_last"},
      {property::kCoverage,
       "the union over ranks holds every index (or exactly the kept ones with drop_last)",
       "ranks do not share one order (per-rank seed, per-rank dataset order) or indices are lost "
       "when splitting; give every rank the same seed and the same dataset order"},
      {property::kDisjointness,
       "an index appears on more than one rank only as padding: exactly total_size - N extra copies",
       "ranks do not share one order, so their shards overlap; seed every rank identically"},
      {property::kPadding,
       "the extra copies are the head of the epoch's order, tiled when longer than N",
       "the sampler pads with the wrong elements; pad with order[:total_size - N]"},
      {property::kReshuffle,
       "with shuffle, consecutive epochs give different orders; without it the order is 0..N-1",
       "set_epoch(epoch) is not called before each epoch, so every epoch repeats the same order"},
      {property::kDeterminism,
       "the same seed and epoch give the same indices, and the order depends only on seed + epoch",
       "the sampler draws from an unseeded or global generator; seed a private generator with "
       "seed + epoch"},
  };
  return kProperties;
}

const std::vector<PropertyInfo>& trainingProperties() {
  static const std::vector<PropertyInfo> kProperties = {
      {property::kGradientEquivalence,
       "W data-parallel ranks with a per-rank mean loss end every step with the gradients, and "
       "after k optimizer steps with the parameters, of one process trained on the concatenated "
       "global batch",
       "the loss is summed instead of averaged (gradients 1/W too small), ranks see batches of "
       "different sizes (uneven last batch), BatchNorm normalises with per-rank statistics, a rank "
       "skipped a step, or the replicas started from different weights (no broadcast from rank 0)"},
  };
  return kProperties;
}

const PropertyInfo* findProperty(std::string_view name) {
  for (const auto* list : {&samplerProperties(), &trainingProperties()}) {
    for (const auto& p : *list) {
      if (p.name == name) return &p;
    }
  }
  return nullptr;
}

std::string formatViolation(const Violation& v) {
  std::string where;
  if (v.epoch >= 0) where += fmt::format(" at epoch {}", v.epoch);
  if (v.step >= 0) where += fmt::format(" step {}", v.step);
  if (!v.ranks.empty()) where += fmt::format(" on rank{} {}", v.ranks.size() == 1 ? "" : "s",
                                             fmt::join(v.ranks, ", "));
  return fmt::format("{}{}: {}", v.property, where, v.detail);
}

}  // namespace ddph
