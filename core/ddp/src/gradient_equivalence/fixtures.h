#pragma once
// The fixtures of a TrainingSetup: its model, its data (the global batch of a step and each rank's
// slice of it), its optimizer and loss, rebuilt alike by the reference and by every rank.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ddph/ddp/gradient_equivalence.h"
#include "ddph/ddp/negative_controls.h"

namespace ddph::ddp::equivalence {

at::ScalarType scalarType(Precision p);

/// The model of a setup, initialised from a private generator seeded with `initSeed` (thread
/// ranks must not race on torch's global one, and every rank must be able to rebuild rank 0's
/// weights).
torch::nn::Sequential buildModel(const TrainingSetup& s, std::uint64_t initSeed);

struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};

/// Rank `rank`'s batch size at `step` (one less on the last rank in the last step with an uneven
/// last batch).
std::int64_t rankBatchSize(const TrainingSetup& s, const NegativeControls& n, int rank, int step);
/// Every rank's samples of `step`, in rank order: what the single process trains on.
Batch globalBatch(const TrainingSetup& s, const NegativeControls& n, int step);
/// Rank `rank`'s slice of `global`.
Batch rankSlice(const TrainingSetup& s, const NegativeControls& n, const Batch& global, int rank,
                int step);

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const TrainingSetup& s,
                                                       std::vector<at::Tensor> params);
at::Tensor lossOf(const TrainingSetup& s, torch::nn::Sequential& net, const Batch& b);

}  // namespace ddph::ddp::equivalence
