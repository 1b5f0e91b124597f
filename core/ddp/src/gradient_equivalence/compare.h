#pragma once
// How far DDP's tensors are from the reference's: per tensor, per parameter list, and for one
// step on every rank (which ranks deviate, whether every gradient is the reference scaled by 1/W
// or W, and how the ranks group by equal gradients).

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ddph/ddp/gradient_equivalence.h"
#include "gradient_equivalence/run.h"

namespace ddph::ddp::equivalence {

// Largest |a - b| relative to max |b| (absolute when b is all zero); +inf for a shape mismatch or
// an undefined gradient on one side only.
struct Deviation {
  double absolute = 0.0;
  double scale = 0.0;
  bool exceeds(const Tolerance& t) const {
    return absolute > t.relative * scale + t.absolute;
  }
  double relative() const { return scale > 0 ? absolute / scale : absolute; }
};

Deviation deviation(const at::Tensor& a, const at::Tensor& b);

/// max over the parameters of `a` versus `b`, with the index of the worst one.
std::pair<Deviation, std::size_t> worst(const std::vector<at::Tensor>& a,
                                        const std::vector<at::Tensor>& b, const Tolerance& t);

// What one step's comparison found on every rank.
struct StepComparison {
  std::vector<std::int64_t> deviating;
  Deviation worst;
  std::size_t worstParam = 0;
  int worstRank = -1;
  bool allScaled = false;  // every gradient exactly 1/W of the reference
  bool allTimesW = false;  // every gradient exactly W times the reference
  std::vector<std::int64_t> sizes;  // per-rank batch sizes (0: skipped or failed)
  // After DDP's backward every rank must hold the same gradients (when every rank ran the step):
  std::vector<std::size_t> splitParams;  // parameters on which the ranks do not all agree
  std::vector<std::vector<int>> classes;  // the ranks grouped by equal gradients
};

/// Compares every rank's gradients at `step` with the reference's `ref`, raising
/// report.maxGradientError; groups the ranks by equal gradients when the step deviates.
StepComparison compareStep(const std::vector<Run>& ranks, const std::vector<at::Tensor>& ref,
                           int step, const Tolerance& tolerance, EquivalenceReport& report);

}  // namespace ddph::ddp::equivalence
