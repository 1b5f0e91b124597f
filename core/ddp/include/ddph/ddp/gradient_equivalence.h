#pragma once
// The gradient-equivalence checker: W data-parallel ranks with DistributedDataParallel must
// compute what one process computes on the concatenated global batch.
//
// A TrainingSetup describes a model, a world, the data split, the loss and the optimizer. The
// checker trains it twice from the same initial weights:
//  - the reference: one process, the whole global batch of each step;
//  - DDP: W thread ranks over an in-process store and real Gloo collectives, each with its own
//    module replica and DistributedDataParallel, its slice of the global batch, a per-rank loss;
// and compares every rank's gradients after every step and its parameters after the last step with
// the reference. A difference beyond the tolerance is a Violation of `gradient-equivalence`, with
// a diagnosis drawn from what was observed (gradients off by exactly 1/W or W, uneven batch
// sizes, ranks that started from different weights, ranks that hold different gradients after
// backward, BatchNorm layers, a collective that failed).
//
// The setups that are NOT equivalent (the negative controls) are a sum-reduced loss and BatchNorm
// without synchronisation, in this vocabulary, and the departures of ddph/ddp/negative_controls.h
// (an uneven last batch, a rank that skips a step, no initial broadcast, mutants of
// DistributedDataParallel itself), which only tests set. The checker does not know which one it
// was given; it reports what it sees.
//
// Torch stays out of this header: it is included by tests and tools that need no tensors.

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "ddph/comm/communicator.h"
#include "ddph/sampler/property.h"

namespace ddph::ddp {

enum class ModelKind { kMlp, kConvNet };
enum class OptimizerKind { kSgdMomentum, kAdam };
enum class Precision { kFloat64, kFloat32 };
enum class LossReduction { kMean, kSum };

struct ModelSpec {
  ModelKind kind = ModelKind::kMlp;
  /// MLP: input features. ConvNet: input channels (images are imageSize x imageSize).
  int inputs = 4;
  int imageSize = 4;
  /// MLP: hidden widths (Linear + ReLU each). ConvNet: channels of 3x3 conv layers (+ ReLU),
  /// followed by a Linear layer on the flattened features.
  std::vector<int> hidden{8};
  int outputs = 2;
  bool bias = true;
  /// A BatchNorm layer after the first hidden layer, per rank (not synchronised).
  bool batchNorm = false;
};

struct TrainingSetup {
  ModelSpec model;
  Precision precision = Precision::kFloat64;
  /// Integer-valued weights, inputs and targets in [-1, 1] (see NOTE [Exact equality]).
  bool integerValued = false;
  int worldSize = 2;
  int batchPerRank = 2;
  int steps = 2;
  OptimizerKind optimizer = OptimizerKind::kSgdMomentum;
  double learningRate = 0.05;
  LossReduction loss = LossReduction::kMean;
  std::uint64_t seed = 1;
  std::size_t bucketCapBytes = std::size_t{25} << 20;

  /// Deadline of every collective (a rank that skips a step leaves its peers waiting).
  std::chrono::milliseconds timeout{30000};
};

/// |ddp - reference| <= relative * max(|reference|) + absolute, per tensor.
struct Tolerance {
  double relative = 0.0;
  double absolute = 0.0;
};

/// NOTE [Equivalence tolerances]: the tolerance the checker uses for a setup by default:
///  - integer-valued data with power-of-two world and batch sizes: exact (0, 0);
///  - float64: relative 1e-12 (+ 1e-15 absolute);
///  - float32: relative 1e-4 (+ 1e-6 absolute), for gradients and parameters alike.
/// The reasons are in the README ("Which tolerances hold and why").
Tolerance defaultTolerance(const TrainingSetup& setup);

/// True when every sum and division of the setup is exact in its precision (integer-valued data,
/// power-of-two world size, batch and outputs, one step, a model small enough that no partial sum
/// needs more mantissa bits than the precision has), so exact equality must hold.
bool exactSetup(const TrainingSetup& setup);

struct EquivalenceReport {
  std::vector<sampler::Violation> violations;  ///< empty: equivalent
  double maxGradientError = 0.0;      ///< largest |ddp - reference| / scale over all gradients
  double maxParameterError = 0.0;     ///< the same for the final parameters
  int buckets = 0;                    ///< number of DDP buckets
  bool equivalent() const { return violations.empty(); }
};

/// Trains `setup` both ways and compares (see the file comment). Throws ConfigError for a setup
/// that cannot run (non-positive sizes, BatchNorm with one sample per rank, …).
EquivalenceReport checkGradientEquivalence(const TrainingSetup& setup, const Tolerance& tolerance);
inline EquivalenceReport checkGradientEquivalence(const TrainingSetup& setup) {
  return checkGradientEquivalence(setup, defaultTolerance(setup));
}

/// Process-per-rank building blocks (the same training as the checker's, for ranks that are
/// processes): train rank `comm.rank()` of `setup` with DistributedDataParallel over `comm`, or
/// the single process on the global batch; both return the parameters after the last step,
/// flattened in module order, as float64.
std::vector<double> trainDdpRank(const TrainingSetup& setup, comm::Communicator& comm);
std::vector<double> trainSingleProcess(const TrainingSetup& setup);

/// One line describing the setup (used by RapidCheck to show counterexamples).
std::string describeSetup(const TrainingSetup& setup);
std::ostream& operator<<(std::ostream& os, const TrainingSetup& setup);

}  // namespace ddph::ddp
