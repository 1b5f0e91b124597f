#include "gradient_equivalence/fixtures.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace ddph::ddp::equivalence {

at::ScalarType scalarType(Precision p) {
  return p == Precision::kFloat64 ? at::kDouble : at::kFloat;
}

namespace {
std::uint64_t dataSeed(const TrainingSetup& s, int step) {
  return s.seed * 1000003ULL + 7919ULL * static_cast<std::uint64_t>(step + 1);
}
}  // namespace

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

std::int64_t rankBatchSize(const TrainingSetup& s, const NegativeControls& n, int rank, int step) {
  const bool shortRank = n.unevenLastBatch && step == s.steps - 1 && rank == s.worldSize - 1;
  return s.batchPerRank - (shortRank ? 1 : 0);
}

Batch globalBatch(const TrainingSetup& s, const NegativeControls& controls, int step) {
  std::int64_t n = 0;
  for (int r = 0; r < s.worldSize; ++r) n += rankBatchSize(s, controls, r, step);
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

Batch rankSlice(const TrainingSetup& s, const NegativeControls& n, const Batch& global, int rank,
                int step) {
  std::int64_t start = 0;
  for (int r = 0; r < rank; ++r) start += rankBatchSize(s, n, r, step);
  const std::int64_t len = rankBatchSize(s, n, rank, step);
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

}  // namespace ddph::ddp::equivalence
