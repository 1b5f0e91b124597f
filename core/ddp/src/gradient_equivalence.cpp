// The gradient-equivalence checker (ddph/ddp/gradient_equivalence.h) in four steps, one file
// each under gradient_equivalence/: fixtures (model, data, optimizer), run (the reference and the
// DDP ranks), compare (deviations) and diagnose (the findings and their causes).
#include "ddph/ddp/gradient_equivalence.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <ostream>

#include "ddph/common/error.h"
#include "ddph/ddp/negative_controls.h"
#include "gradient_equivalence/diagnose.h"
#include "gradient_equivalence/run.h"

namespace ddph::ddp {
namespace {

bool powerOfTwo(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

void validateSetup(const TrainingSetup& s, const NegativeControls& n) {
  const ModelSpec& m = s.model;
  DDPH_CHECK(s.worldSize >= 1 && s.worldSize <= 64, "world size {} is not in [1, 64]", s.worldSize);
  DDPH_CHECK(s.batchPerRank >= 1 && s.steps >= 1, "batch per rank and steps must be positive");
  DDPH_CHECK(m.inputs >= 1 && m.outputs >= 1 && m.imageSize >= 1, "model sizes must be positive");
  for (int h : m.hidden) DDPH_CHECK(h >= 1, "hidden width {} is not positive", h);
  DDPH_CHECK(!m.batchNorm || !m.hidden.empty(), "BatchNorm needs a hidden layer");
  DDPH_CHECK(!m.batchNorm || s.batchPerRank >= 2 + (n.unevenLastBatch ? 1 : 0),
             "BatchNorm in training needs at least 2 samples per rank");
  DDPH_CHECK(!n.unevenLastBatch || s.batchPerRank >= 2,
             "an uneven last batch needs at least 2 samples per rank");
}

}  // namespace

bool exactSetup(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  if (!s.integerValued || m.batchNorm || s.steps != 1) return false;
  if (!powerOfTwo(s.worldSize) || !powerOfTwo(s.batchPerRank) || !powerOfTwo(m.outputs)) {
    return false;
  }
  // NOTE [Exact equality]: with weights, inputs and targets in {-1, 0, 1}, every activation is an
  // integer and every gradient is an integer times 2 / (N * outputs) (a power of two, so the
  // scaling is exact, and so is DDP's division by a power-of-two W). Sums of integers are exact
  // in any order while they stay below 2^mantissa. Bound the integers: forward magnitudes grow by
  // fanIn per layer (+1 for the bias), backward by fanOut, and a weight gradient sums N (times
  // the image area for convolutions) products.
  const double limit = s.precision == Precision::kFloat64 ? std::ldexp(1.0, 52) : std::ldexp(1.0, 23);
  const double n = static_cast<double>(s.worldSize) * s.batchPerRank;
  const double area = m.kind == ModelKind::kConvNet ? double(m.imageSize) * m.imageSize : 1.0;
  std::vector<double> fanIn, fanOut;
  int in = m.inputs;
  for (int h : m.hidden) {
    fanIn.push_back(m.kind == ModelKind::kConvNet ? 9.0 * in : in);
    fanOut.push_back(m.kind == ModelKind::kConvNet ? 9.0 * h : h);
    in = h;
  }
  fanIn.push_back(m.kind == ModelKind::kConvNet ? double(in) * area : in);
  fanOut.push_back(m.outputs);
  double activation = 1.0;
  std::vector<double> activations{activation};
  for (double f : fanIn) {
    activation = f * activation + 1.0;
    activations.push_back(activation);
  }
  double grad = 2.0 * (activation + 1.0);
  double largest = activation * (m.kind == ModelKind::kConvNet ? area : 1.0);
  for (std::size_t l = fanIn.size(); l-- > 0;) {
    const double positions = (m.kind == ModelKind::kConvNet && l + 1 < fanIn.size()) ? area : 1.0;
    largest = std::max(largest, n * positions * grad * activations[l]);
    grad *= fanOut[l];
    largest = std::max(largest, n * grad);
  }
  return largest < limit;
}

Tolerance defaultTolerance(const TrainingSetup& s) {
  if (exactSetup(s)) return {0.0, 0.0};
  if (s.precision == Precision::kFloat64) return {1e-12, 1e-15};
  return {1e-4, 1e-6};
}

Tolerance defaultTolerance(const TrainingSetup& s, const NegativeControls& n) {
  if (!n.unevenLastBatch) return defaultTolerance(s);
  TrainingSetup inexact = s;  // an uneven batch is not a power of two: no exact setup
  inexact.integerValued = false;
  return defaultTolerance(inexact);
}

EquivalenceReport checkGradientEquivalence(const TrainingSetup& s, const NegativeControls& n,
                                           const Tolerance& tolerance) {
  validateSetup(s, n);
  EquivalenceReport report;
  const equivalence::Run reference = equivalence::runReference(s, n);
  const std::vector<equivalence::Run> ranks = equivalence::runDdpRanks(s, n);
  report.buckets = ranks[0].buckets;
  const std::string stepsNote = equivalence::unequalStepsNote(ranks);
  equivalence::checkFailedRanks(ranks, stepsNote, report);
  const bool divergedStart = !equivalence::checkStartingWeights(ranks, report).empty();
  equivalence::checkGradients(s, reference, ranks, tolerance, stepsNote, divergedStart, report);
  equivalence::checkFinalParameters(s, reference, ranks, tolerance, report);
  return report;
}

EquivalenceReport checkGradientEquivalence(const TrainingSetup& s, const Tolerance& tolerance) {
  return checkGradientEquivalence(s, NegativeControls{}, tolerance);
}

std::string describeSetup(const TrainingSetup& s, const NegativeControls& n) {
  const ModelSpec& m = s.model;
  std::string model =
      m.kind == ModelKind::kMlp
          ? fmt::format("MLP {}-[{}]-{}", m.inputs, fmt::join(m.hidden, ","), m.outputs)
          : fmt::format("ConvNet {}x{}x{}-[{}]-{}", m.inputs, m.imageSize, m.imageSize,
                        fmt::join(m.hidden, ","), m.outputs);
  std::string extras;
  if (!m.bias) extras += " no-bias";
  if (m.batchNorm) extras += " batchnorm";
  if (s.integerValued) extras += " integer-valued";
  if (s.loss == LossReduction::kSum) extras += " sum-loss";
  if (n.unevenLastBatch) extras += " uneven-last-batch";
  if (n.skipRank >= 0) extras += fmt::format(" rank-{}-skips-step-{}", n.skipRank, n.skipStep);
  if (n.noInitialBroadcast) extras += " no-initial-broadcast";
  if (n.ddpMutant != DdpMutant::kNone) {
    extras += fmt::format(" ddp-mutant={}", ddpMutantName(n.ddpMutant));
    if (n.mutantRank >= 0) extras += fmt::format("@rank{}", n.mutantRank);
  }
  return fmt::format("{}{} {} W={} B={} steps={} {} lr={} seed={} bucket={}B", model, extras,
                     s.precision == Precision::kFloat64 ? "float64" : "float32", s.worldSize,
                     s.batchPerRank, s.steps,
                     s.optimizer == OptimizerKind::kAdam ? "Adam" : "SGD-momentum", s.learningRate,
                     s.seed, s.bucketCapBytes);
}

std::string describeSetup(const TrainingSetup& setup) { return describeSetup(setup, {}); }

std::ostream& operator<<(std::ostream& os, const TrainingSetup& setup) {
  return os << describeSetup(setup);
}

}  // namespace ddph::ddp
