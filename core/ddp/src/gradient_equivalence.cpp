#include "ddph/ddp/gradient_equivalence.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <ostream>
#include <thread>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/error.h"
#include "ddph/ddp/distributed_data_parallel.h"

namespace ddph {
namespace {

bool powerOfTwo(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

at::ScalarType scalarType(Precision p) {
  return p == Precision::kFloat64 ? at::kDouble : at::kFloat;
}

std::uint64_t dataSeed(const TrainingSetup& s, int step) {
  return s.seed * 1000003ULL + 7919ULL * static_cast<std::uint64_t>(step + 1);
}

// The model of a setup, initialised from a private generator (thread ranks must not race on
// torch's global one, and every rank must be able to rebuild rank 0's weights).
torch::nn::Sequential buildModel(const TrainingSetup& s, std::uint64_t initSeed) {
  const ModelSpec& m = s.model;
  torch::nn::Sequential net;
  if (m.kind == ModelKind::kMlp) {
    int in = m.inputs;
    for (std::size_t i = 0; i < m.hidden.size(); ++i) {
      net->push_back(torch::nn::Linear(torch::nn::LinearOptions(in, m.hidden[i]).bias(m.bias)));
      if (i == 0 && m.batchNorm) net->push_back(torch::nn::BatchNorm1d(m.hidden[i]));
      net->push_back(torch::nn::ReLU());
      in = m.hidden[i];
    }
    net->push_back(torch::nn::Linear(torch::nn::LinearOptions(in, m.outputs).bias(m.bias)));
  } else {
    int channels = m.inputs;
    for (std::size_t i = 0; i < m.hidden.size(); ++i) {
      net->push_back(torch::nn::Conv2d(
          torch::nn::Conv2dOptions(channels, m.hidden[i], 3).padding(1).bias(m.bias)));
      if (i == 0 && m.batchNorm) net->push_back(torch::nn::BatchNorm2d(m.hidden[i]));
      net->push_back(torch::nn::ReLU());
      channels = m.hidden[i];
    }
    net->push_back(torch::nn::Flatten());
    net->push_back(torch::nn::Linear(
        torch::nn::LinearOptions(channels * m.imageSize * m.imageSize, m.outputs).bias(m.bias)));
  }
  net->to(scalarType(s.precision));
  auto gen = at::detail::createCPUGenerator(initSeed);
  torch::NoGradGuard noGrad;
  for (auto& p : net->parameters()) {
    if (s.integerValued) {
      p.copy_(at::randint(-1, 2, p.sizes(), gen, p.options()));
    } else {
      const double fanIn = p.dim() > 1 ? static_cast<double>(p[0].numel()) : 1.0;
      const double bound = 1.0 / std::sqrt(fanIn);
      p.uniform_(-bound, bound, gen);
    }
  }
  return net;
}

struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};

std::int64_t rankBatchSize(const TrainingSetup& s, int rank, int step) {
  const bool shortRank = s.unevenLastBatch && step == s.steps - 1 && rank == s.worldSize - 1;
  return s.batchPerRank - (shortRank ? 1 : 0);
}

Batch globalBatch(const TrainingSetup& s, int step) {
  std::int64_t n = 0;
  for (int r = 0; r < s.worldSize; ++r) n += rankBatchSize(s, r, step);
  const ModelSpec& m = s.model;
  std::vector<std::int64_t> shape{n, m.inputs};
  if (m.kind == ModelKind::kConvNet) shape = {n, m.inputs, m.imageSize, m.imageSize};
  const auto options = at::TensorOptions().dtype(scalarType(s.precision));
  auto gen = at::detail::createCPUGenerator(dataSeed(s, step));
  Batch b;
  if (s.integerValued) {
    b.inputs = at::randint(-1, 2, shape, gen, options);
    b.targets = at::randint(-1, 2, {n, m.outputs}, gen, options);
  } else {
    b.inputs = at::randn(shape, gen, options);
    b.targets = at::randn({n, m.outputs}, gen, options);
  }
  return b;
}

Batch rankSlice(const TrainingSetup& s, const Batch& global, int rank, int step) {
  std::int64_t start = 0;
  for (int r = 0; r < rank; ++r) start += rankBatchSize(s, r, step);
  const std::int64_t len = rankBatchSize(s, rank, step);
  return {global.inputs.narrow(0, start, len), global.targets.narrow(0, start, len)};
}

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const TrainingSetup& s,
                                                       std::vector<at::Tensor> params) {
  if (s.optimizer == OptimizerKind::kAdam) {
    return std::make_unique<torch::optim::Adam>(std::move(params),
                                                torch::optim::AdamOptions(s.learningRate));
  }
  return std::make_unique<torch::optim::SGD>(
      std::move(params), torch::optim::SGDOptions(s.learningRate).momentum(0.9));
}

at::Tensor lossOf(const TrainingSetup& s, torch::nn::Sequential& net, const Batch& b) {
  const auto out = net->forward(b.inputs);
  return at::mse_loss(out, b.targets,
                      s.loss == LossReduction::kMean ? at::Reduction::Mean : at::Reduction::Sum);
}

std::vector<at::Tensor> cloneAll(const std::vector<at::Tensor>& ts, bool grads) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) {
    const at::Tensor& v = grads ? t.grad() : t;
    out.push_back(v.defined() ? v.detach().clone() : at::Tensor());
  }
  return out;
}

// What one training run (the reference or one rank) produced.
struct Run {
  std::vector<at::Tensor> initial;
  std::vector<std::vector<at::Tensor>> grads;  // per step; empty when the step was skipped
  std::vector<at::Tensor> final;
  std::vector<std::int64_t> batchSizes;        // per step, 0 when skipped
  std::vector<std::string> names;              // parameter names (reference only)
  int stepsRun = 0;
  int buckets = 0;
  std::vector<std::vector<std::size_t>> bucketParams;  // parameter indices per bucket
  int failedStep = -1;
  std::string error;
  // Kept until every rank finished, then destroyed communicator first (NOTE [Teardown order]).
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<DistributedDataParallel> ddp;
};

// One optimiser step on batch `b`, its gradients and batch size recorded in `run`.
void trainStep(const TrainingSetup& s, torch::nn::Sequential& net, const Batch& b,
               torch::optim::Optimizer& optimizer,
               const std::vector<torch::Tensor>& params, Run& run) {
  optimizer.zero_grad();
  lossOf(s, net, b).backward();
  run.grads.push_back(cloneAll(params, true));
  run.batchSizes.push_back(b.inputs.size(0));
  optimizer.step();
  ++run.stepsRun;
}

Run runReference(const TrainingSetup& s) {
  Run run;
  auto net = buildModel(s, s.seed);
  const auto params = net->parameters();
  for (const auto& item : net->named_parameters()) run.names.push_back(item.key());
  run.initial = cloneAll(params, false);
  auto optimizer = makeOptimizer(s, params);
  for (int step = 0; step < s.steps; ++step) {
    trainStep(s, net, globalBatch(s, step), *optimizer, params, run);
  }
  run.final = cloneAll(params, false);
  return run;
}

// Trains one DDP rank over `comm`; throws what the collectives throw. `step` tracks progress.
void trainRank(const TrainingSetup& s, Communicator& comm, Run& run, int& step) {
  const int rank = comm.rank();
  auto net = buildModel(s, s.noInitialBroadcast ? s.seed + static_cast<std::uint64_t>(rank)
                                                : s.seed);
  DdpOptions ddpOptions;
  ddpOptions.bucketCapBytes = s.bucketCapBytes;
  ddpOptions.broadcastAtConstruction = !s.noInitialBroadcast;
  if (s.mutantRank < 0 || s.mutantRank == rank) ddpOptions.mutant = s.ddpMutant;
  run.ddp = std::make_unique<DistributedDataParallel>(net.ptr(), comm, ddpOptions);
  run.bucketParams = run.ddp->bucketAssignment();
  run.buckets = static_cast<int>(run.bucketParams.size());
  const auto params = net->parameters();
  run.initial = cloneAll(params, false);
  auto optimizer = makeOptimizer(s, params);
  for (step = 0; step < s.steps; ++step) {
    if (rank == s.skipRank && step == s.skipStep) {
      run.grads.emplace_back();
      run.batchSizes.push_back(0);
      continue;
    }
    trainStep(s, net, rankSlice(s, globalBatch(s, step), rank, step), *optimizer, params, run);
  }
  run.final = cloneAll(params, false);
}

void runRank(const TrainingSetup& s, const std::shared_ptr<RendezvousStore>& store, int rank,
             Run& run) {
  int step = -1;
  try {
    GlooOptions options;
    options.timeout = s.timeout;
    run.comm = connectGloo(store, rank, s.worldSize, options, "gradient-equivalence");
    trainRank(s, *run.comm, run, step);
  } catch (const std::exception& e) {
    run.failedStep = step;
    run.error = e.what();
    const auto nl = run.error.find('\n');
    if (nl != std::string::npos) run.error.resize(nl);
  }
}

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

Deviation deviation(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() && !b.defined()) return {};
  const double inf = std::numeric_limits<double>::infinity();
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) return {inf, 0.0};
  const auto da = a.to(at::kDouble);
  const auto db = b.to(at::kDouble);
  return {(da - db).abs().max().item<double>(), db.abs().max().item<double>()};
}

// max over the parameters of `a` versus `b`, with the index of the worst one.
std::pair<Deviation, std::size_t> worst(const std::vector<at::Tensor>& a,
                                        const std::vector<at::Tensor>& b, const Tolerance& t) {
  Deviation w;
  std::size_t at = 0;
  double worstExcess = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const Deviation d = deviation(a[i], b[i]);
    const double excess = d.absolute - (t.relative * d.scale + t.absolute);
    if (excess > worstExcess) {
      worstExcess = excess;
      w = d;
      at = i;
    }
  }
  return {w, at};
}

// True when `ddp` is `reference` scaled by `factor` (to 1e-6 relative), for every tensor.
bool scaledCopy(const std::vector<at::Tensor>& ddp, const std::vector<at::Tensor>& reference,
                double factor) {
  for (std::size_t i = 0; i < ddp.size() && i < reference.size(); ++i) {
    if (!ddp[i].defined() || !reference[i].defined()) return false;
    const auto scaled = reference[i].to(at::kDouble) * factor;
    const Deviation d = deviation(ddp[i], scaled);
    if (d.absolute > 1e-6 * d.scale + 1e-12) return false;
  }
  return true;
}

std::string errorKind(const std::string& message) {
  return message.size() > 300 ? message.substr(0, 300) + "…" : message;
}

}  // namespace

bool exactSetup(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  if (!s.integerValued || m.batchNorm || s.steps != 1 || s.unevenLastBatch) return false;
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

namespace {

void validateSetup(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  DDPH_CHECK(s.worldSize >= 1 && s.worldSize <= 64, "world size {} is not in [1, 64]", s.worldSize);
  DDPH_CHECK(s.batchPerRank >= 1 && s.steps >= 1, "batch per rank and steps must be positive");
  DDPH_CHECK(m.inputs >= 1 && m.outputs >= 1 && m.imageSize >= 1, "model sizes must be positive");
  for (int h : m.hidden) DDPH_CHECK(h >= 1, "hidden width {} is not positive", h);
  DDPH_CHECK(!m.batchNorm || !m.hidden.empty(), "BatchNorm needs a hidden layer");
  DDPH_CHECK(!m.batchNorm || s.batchPerRank >= 2 + (s.unevenLastBatch ? 1 : 0),
             "BatchNorm in training needs at least 2 samples per rank");
  DDPH_CHECK(!s.unevenLastBatch || s.batchPerRank >= 2,
             "an uneven last batch needs at least 2 samples per rank");
}

// Every rank in a thread of its own over an in-process store, each recording its run.
std::vector<Run> runDdpRanks(const TrainingSetup& s) {
  std::vector<Run> ranks(static_cast<std::size_t>(s.worldSize));
  auto store = makeInProcessStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < s.worldSize; ++r) {
    threads.emplace_back([&, r] { runRank(s, store, r, ranks[static_cast<std::size_t>(r)]); });
  }
  for (auto& t : threads) t.join();
  // NOTE [Teardown order]: communicators go first (a process group waits for its queued work,
  // bounded by its timeout), then the DDP objects whose buckets that work may still write to.
  for (auto& run : ranks) run.comm.reset();
  for (auto& run : ranks) run.ddp.reset();
  return ranks;
}

Violation equivalenceViolation(std::vector<std::int64_t> ranks, std::int64_t step,
                               std::string detail) {
  Violation v;
  v.property = std::string(property::kGradientEquivalence);
  v.ranks = std::move(ranks);
  v.step = step;
  v.detail = std::move(detail);
  return v;
}

/// The ranks and steps a rank skipped (it recorded no gradients for them while its loop went
/// on), as the note every finding then carries; empty when every rank ran every step.
std::string unequalStepsNote(const std::vector<Run>& ranks) {
  std::vector<std::string> skipped;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (std::size_t step = 0; step < ranks[r].grads.size(); ++step) {
      if (ranks[r].grads[step].empty()) skipped.push_back(fmt::format("rank {} step {}", r, step));
    }
  }
  if (skipped.empty()) return {};
  return fmt::format(
      "; the ranks ran different numbers of steps (skipped: {}): their collectives paired "
      "gradients of different steps, and a rank with more steps then waited for a peer that "
      "never came. Every rank must run every step (pad or drop the last batch instead of "
      "skipping one)",
      fmt::join(skipped, ", "));
}

// 1. Ranks that failed (a timeout or a broken collective).
void checkFailedRanks(const std::vector<Run>& ranks, const std::string& stepsNote,
                      EquivalenceReport& report) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Run& run = ranks[r];
    if (run.error.empty()) continue;
    report.violations.push_back(equivalenceViolation(
        {static_cast<std::int64_t>(r)}, run.failedStep,
        fmt::format("rank {} failed and could not finish training: {}{}", r, errorKind(run.error),
                    stepsNote)));
  }
}

// 2. Replicas that did not start from rank 0's weights; returns them.
std::vector<std::int64_t> checkStartingWeights(const std::vector<Run>& ranks,
                                               EquivalenceReport& report) {
  std::vector<std::int64_t> diverged;
  double gap = 0.0;
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    if (ranks[r].initial.empty() || ranks[0].initial.empty()) continue;
    const auto [d, index] = worst(ranks[r].initial, ranks[0].initial, Tolerance{});
    if (d.absolute > 0) {
      diverged.push_back(static_cast<std::int64_t>(r));
      gap = std::max(gap, d.absolute);
    }
  }
  if (!diverged.empty()) {
    report.violations.push_back(equivalenceViolation(
        diverged, 0,
        fmt::format("the replicas started from different weights (largest difference to rank 0: "
                    "{:.3g}): parameters were not broadcast from rank 0 before training, so every "
                    "rank trains its own model and no single-process run computes the same",
                    gap)));
  }
  return diverged;
}

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

// Groups the ranks by equal gradients at `step` and lists the parameters they disagree on
// (NOTE [DDP mutants]: a bucket never reduced, buckets paired in another order).
void compareRanks(const std::vector<Run>& ranks, int step, const Tolerance& tolerance,
                  StepComparison& c) {
  const auto grads = [&](int r) -> const std::vector<at::Tensor>& {
    return ranks[static_cast<std::size_t>(r)].grads[static_cast<std::size_t>(step)];
  };
  const auto same = [&](const at::Tensor& a, const at::Tensor& b) {
    return !deviation(a, b).exceeds(tolerance);
  };
  const int W = static_cast<int>(ranks.size());
  for (std::size_t k = 0; k < grads(0).size(); ++k) {
    for (int r = 1; r < W; ++r) {
      if (!same(grads(r)[k], grads(0)[k])) {
        c.splitParams.push_back(k);
        break;
      }
    }
  }
  for (int r = 0; r < W; ++r) {
    auto home = std::find_if(c.classes.begin(), c.classes.end(), [&](const std::vector<int>& cls) {
      return std::all_of(c.splitParams.begin(), c.splitParams.end(), [&](std::size_t k) {
        return same(grads(r)[k], grads(cls.front())[k]);
      });
    });
    if (home == c.classes.end()) {
      c.classes.push_back({r});
    } else {
      home->push_back(r);
    }
  }
}

StepComparison compareStep(const std::vector<Run>& ranks, const std::vector<at::Tensor>& ref,
                           int step, const Tolerance& tolerance, EquivalenceReport& report) {
  const int W = static_cast<int>(ranks.size());
  StepComparison c;
  c.allScaled = c.allTimesW = W > 1;
  for (int r = 0; r < W; ++r) {
    const Run& run = ranks[static_cast<std::size_t>(r)];
    if (static_cast<std::size_t>(step) >= run.grads.size() ||
        run.grads[static_cast<std::size_t>(step)].empty()) {
      c.sizes.push_back(0);
      c.allScaled = c.allTimesW = false;
      continue;
    }
    c.sizes.push_back(run.batchSizes[static_cast<std::size_t>(step)]);
    const auto& got = run.grads[static_cast<std::size_t>(step)];
    const auto [d, index] = worst(got, ref, tolerance);
    report.maxGradientError = std::max(report.maxGradientError, d.relative());
    if (d.exceeds(tolerance)) {
      c.deviating.push_back(r);
      if (c.worstRank < 0 || d.relative() > c.worst.relative()) {
        c.worst = d;
        c.worstParam = index;
        c.worstRank = r;
      }
    }
    c.allScaled = c.allScaled && scaledCopy(got, ref, 1.0 / W);
    c.allTimesW = c.allTimesW && scaledCopy(got, ref, static_cast<double>(W));
  }
  // Only a step that deviates needs a diagnosis (checkGradients skips the others).
  if (!c.deviating.empty() && std::find(c.sizes.begin(), c.sizes.end(), 0) == c.sizes.end()) {
    compareRanks(ranks, step, tolerance, c);
  }
  return c;
}

// The most likely reason one step's gradients differ, from what the comparison saw.
// Why the ranks hold different gradients after backward, or "" when they agree.
std::string splitCause(const StepComparison& c, const Run& rank0,
                       const std::vector<std::string>& names) {
  if (c.splitParams.empty() || c.classes.size() < 2) return "";
  const auto W = c.sizes.size();
  std::vector<std::string> split;
  for (std::size_t k : c.splitParams) split.push_back("'" + names[k] + "'");
  if (c.classes.size() == W && c.splitParams.size() == names.size()) {
    return "no two ranks hold the same gradient of any parameter after backward: nothing was "
           "averaged across ranks (the allreduce was skipped); DDP must leave every rank with the "
           "same averaged gradients";
  }
  if (c.classes.size() == W) {
    std::string bucket;
    for (std::size_t b = 0; b < rank0.bucketParams.size(); ++b) {
      auto params = rank0.bucketParams[b];
      std::sort(params.begin(), params.end());
      if (params == c.splitParams) {
        bucket = fmt::format(", exactly bucket {} of {}", b, rank0.bucketParams.size());
      }
    }
    return fmt::format(
        "every rank holds its own gradient of {} ({} of {} parameters{}) and the same as the others "
        "for the rest: {} never allreduced",
        fmt::join(split, ", "), c.splitParams.size(), names.size(), bucket,
        bucket.empty() ? "those gradients were" : "that bucket was");
  }
  // A majority agrees: the others reduced, but paired their buckets with other buckets.
  const auto largest = std::max_element(
      c.classes.begin(), c.classes.end(),
      [](const auto& a, const auto& b) { return a.size() < b.size(); });
  std::vector<int> odd;
  for (const auto& cls : c.classes) {
    if (&cls != &*largest) odd.insert(odd.end(), cls.begin(), cls.end());
  }
  std::sort(odd.begin(), odd.end());
  return fmt::format(
      "rank(s) {} hold gradients of {} different from the other {} ranks', which agree: their "
      "allreduces paired different buckets (DDP launched its buckets in another order there; Gloo "
      "and NCCL pair collectives by the order they start)",
      fmt::join(odd, ", "), fmt::join(split, ", "), largest->size());
}

std::string gradientCause(const StepComparison& c, int W, int step, const std::string& stepsNote,
                          bool divergedStart, bool batchNorm, const std::string& split) {
  const bool unevenSizes =
      std::adjacent_find(c.sizes.begin(), c.sizes.end(), std::not_equal_to<>()) != c.sizes.end();
  if (c.allScaled) {
    return fmt::format(
        "every DDP gradient is exactly 1/W = 1/{} of the single-process one: the loss is summed "
        "over the batch, and DDP averages gradients over ranks; use a mean-reduced loss (or scale "
        "a summed loss by W)",
        W);
  }
  if (c.allTimesW) {
    return fmt::format(
        "every DDP gradient is exactly W = {} times the single-process one: gradients were "
        "summed over ranks instead of averaged (divide by the world size)",
        W);
  }
  if (!split.empty() && !divergedStart) return split;
  if (!stepsNote.empty()) {
    return fmt::format("per-rank batch sizes at this step were [{}] (0: skipped or failed){}",
                       fmt::join(c.sizes, ", "), stepsNote);
  }
  if (unevenSizes) {
    return fmt::format(
        "the ranks had batches of different sizes [{}]: each rank's mean loss weighs its samples "
        "by 1/(W * B_rank) instead of 1/N, so averaging over ranks is not the global mean; give "
        "every rank a batch of the same size (drop_last, or pad the last batch)",
        fmt::join(c.sizes, ", "));
  }
  if (divergedStart) return "follows from the different starting weights (see step 0)";
  if (batchNorm) {
    return "the model has BatchNorm layers, and each rank normalises with the statistics of its "
           "own batch instead of the global batch's; use synchronised BatchNorm or a "
           "normalisation that is per sample";
  }
  if (step > 0) {
    return "the parameters already differed after the previous step, or DDP averaged wrongly";
  }
  return "no known cause: DDP's averaged gradients are not the single-process gradients";
}

// 3. Gradients, step by step.
void checkGradients(const TrainingSetup& s, const Run& reference, const std::vector<Run>& ranks,
                    const Tolerance& tolerance, const std::string& stepsNote, bool divergedStart,
                    EquivalenceReport& report) {
  for (int step = 0; step < s.steps; ++step) {
    const StepComparison c = compareStep(
        ranks, reference.grads[static_cast<std::size_t>(step)], step, tolerance, report);
    if (c.deviating.empty()) continue;
    const std::string why =
        gradientCause(c, s.worldSize, step, stepsNote, divergedStart, s.model.batchNorm,
                      splitCause(c, ranks[0], reference.names));
    report.violations.push_back(equivalenceViolation(
        c.deviating, step,
        fmt::format("gradients differ from one process on the global batch of {}: worst on rank "
                    "{}, parameter '{}', max |ddp - single| = {:.3g} against max |single| = "
                    "{:.3g} (tolerance {:.1g} relative + {:.1g}); {}",
                    reference.batchSizes[static_cast<std::size_t>(step)], c.worstRank,
                    reference.names[c.worstParam], c.worst.absolute, c.worst.scale,
                    tolerance.relative, tolerance.absolute, why)));
  }
}

// 4. Parameters after the last step.
void checkFinalParameters(const TrainingSetup& s, const Run& reference,
                          const std::vector<Run>& ranks, const Tolerance& tolerance,
                          EquivalenceReport& report) {
  std::vector<std::int64_t> deviating;
  Deviation worstDev;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].final.empty()) continue;
    const auto [d, index] = worst(ranks[r].final, reference.final, tolerance);
    report.maxParameterError = std::max(report.maxParameterError, d.relative());
    if (d.exceeds(tolerance)) {
      deviating.push_back(static_cast<std::int64_t>(r));
      if (d.relative() > worstDev.relative()) worstDev = d;
    }
  }
  if (deviating.empty()) return;
  report.violations.push_back(equivalenceViolation(
      deviating, /*step: not one step's finding*/ -1,
      fmt::format("parameters after {} {} step(s) differ from one process on the global batch: "
                  "max |ddp - single| = {:.3g} against max |single| = {:.3g}",
                  s.steps, s.optimizer == OptimizerKind::kAdam ? "Adam" : "SGD-momentum",
                  worstDev.absolute, worstDev.scale)));
}

}  // namespace

EquivalenceReport checkGradientEquivalence(const TrainingSetup& s, const Tolerance& tolerance) {
  validateSetup(s);
  EquivalenceReport report;
  const Run reference = runReference(s);
  const std::vector<Run> ranks = runDdpRanks(s);
  report.buckets = ranks[0].buckets;
  const std::string stepsNote = unequalStepsNote(ranks);
  checkFailedRanks(ranks, stepsNote, report);
  const bool divergedStart = !checkStartingWeights(ranks, report).empty();
  checkGradients(s, reference, ranks, tolerance, stepsNote, divergedStart, report);
  checkFinalParameters(s, reference, ranks, tolerance, report);
  return report;
}

namespace {
std::vector<double> flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<double> out;
  for (const auto& t : tensors) {
    const auto d = t.to(at::kDouble).contiguous();
    out.insert(out.end(), d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  }
  return out;
}
}  // namespace

std::vector<double> trainDdpRank(const TrainingSetup& setup, Communicator& comm) {
  DDPH_CHECK(comm.size() == setup.worldSize, "communicator has {} ranks, the setup {}",
             comm.size(), setup.worldSize);
  Run run;
  int step = -1;
  trainRank(setup, comm, run, step);
  run.ddp.reset();
  return flatten(run.final);
}

std::vector<double> trainSingleProcess(const TrainingSetup& setup) {
  return flatten(runReference(setup).final);
}

std::string describeSetup(const TrainingSetup& s) {
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
  if (s.unevenLastBatch) extras += " uneven-last-batch";
  if (s.skipRank >= 0) extras += fmt::format(" rank-{}-skips-step-{}", s.skipRank, s.skipStep);
  if (s.noInitialBroadcast) extras += " no-initial-broadcast";
  if (s.ddpMutant != DdpMutant::kNone) {
    extras += fmt::format(" ddp-mutant={}", ddpMutantName(s.ddpMutant));
    if (s.mutantRank >= 0) extras += fmt::format("@rank{}", s.mutantRank);
  }
  return fmt::format("{}{} {} W={} B={} steps={} {} lr={} seed={} bucket={}B", model, extras,
                     s.precision == Precision::kFloat64 ? "float64" : "float32", s.worldSize,
                     s.batchPerRank, s.steps,
                     s.optimizer == OptimizerKind::kAdam ? "Adam" : "SGD-momentum", s.learningRate,
                     s.seed, s.bucketCapBytes);
}

std::ostream& operator<<(std::ostream& os, const TrainingSetup& setup) {
  return os << describeSetup(setup);
}

}  // namespace ddph
