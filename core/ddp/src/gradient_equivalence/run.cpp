#include "gradient_equivalence/run.h"

#include <thread>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/error.h"
#include "gradient_equivalence/fixtures.h"

namespace ddph::ddp::equivalence {
namespace {

std::vector<at::Tensor> cloneAll(const std::vector<at::Tensor>& ts, bool grads) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) {
    const at::Tensor& v = grads ? t.grad() : t;
    out.push_back(v.defined() ? v.detach().clone() : at::Tensor());
  }
  return out;
}

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

}  // namespace

Run runReference(const TrainingSetup& s, const NegativeControls& n) {
  Run run;
  auto net = buildModel(s, s.seed);
  const auto params = net->parameters();
  for (const auto& item : net->named_parameters()) run.names.push_back(item.key());
  run.initial = cloneAll(params, false);
  auto optimizer = makeOptimizer(s, params);
  for (int step = 0; step < s.steps; ++step) {
    trainStep(s, net, globalBatch(s, n, step), *optimizer, params, run);
  }
  run.final = cloneAll(params, false);
  return run;
}

void trainRank(const TrainingSetup& s, const NegativeControls& n, comm::Communicator& comm,
               Run& run, int& step) {
  const int rank = comm.rank();
  auto net = buildModel(s, n.noInitialBroadcast ? s.seed + static_cast<std::uint64_t>(rank)
                                                : s.seed);
  DdpOptions ddpOptions;
  ddpOptions.bucketCapBytes = s.bucketCapBytes;
  ddpOptions.broadcastAtConstruction = !n.noInitialBroadcast;
  if (n.mutantRank < 0 || n.mutantRank == rank) ddpOptions.mutant = n.ddpMutant;
  run.ddp = std::make_unique<DistributedDataParallel>(net.ptr(), comm, ddpOptions);
  run.bucketParams = run.ddp->bucketAssignment();
  run.buckets = static_cast<int>(run.bucketParams.size());
  const auto params = net->parameters();
  run.initial = cloneAll(params, false);
  auto optimizer = makeOptimizer(s, params);
  for (step = 0; step < s.steps; ++step) {
    if (rank == n.skipRank && step == n.skipStep) {
      run.grads.emplace_back();
      run.batchSizes.push_back(0);
      continue;
    }
    trainStep(s, net, rankSlice(s, n, globalBatch(s, n, step), rank, step), *optimizer, params,
              run);
  }
  run.final = cloneAll(params, false);
}

namespace {

void runRank(const TrainingSetup& s, const NegativeControls& n,
             const std::shared_ptr<comm::RendezvousStore>& store, int rank, Run& run) {
  int step = -1;
  try {
    comm::GlooOptions options;
    options.timeout = s.timeout;
    run.comm = comm::connectGloo(store, rank, s.worldSize, options, "gradient-equivalence");
    trainRank(s, n, *run.comm, run, step);
  } catch (const std::exception& e) {
    run.failedStep = step;
    run.error = e.what();
    const auto nl = run.error.find('\n');
    if (nl != std::string::npos) run.error.resize(nl);
  }
}

std::vector<double> flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<double> out;
  for (const auto& t : tensors) {
    const auto d = t.to(at::kDouble).contiguous();
    out.insert(out.end(), d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  }
  return out;
}

}  // namespace

std::vector<Run> runDdpRanks(const TrainingSetup& s, const NegativeControls& n) {
  std::vector<Run> ranks(static_cast<std::size_t>(s.worldSize));
  auto store = comm::makeInProcessStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < s.worldSize; ++r) {
    threads.emplace_back([&, r] { runRank(s, n, store, r, ranks[static_cast<std::size_t>(r)]); });
  }
  for (auto& t : threads) t.join();
  // NOTE [Teardown order]: communicators go first (a process group waits for its queued work,
  // bounded by its timeout), then the DDP objects whose buckets that work may still write to.
  for (auto& run : ranks) run.comm.reset();
  for (auto& run : ranks) run.ddp.reset();
  return ranks;
}

}  // namespace ddph::ddp::equivalence

namespace ddph::ddp {

std::vector<double> trainDdpRank(const TrainingSetup& setup, comm::Communicator& comm) {
  DDPH_CHECK(comm.size() == setup.worldSize, "communicator has {} ranks, the setup {}",
             comm.size(), setup.worldSize);
  equivalence::Run run;
  int step = -1;
  equivalence::trainRank(setup, NegativeControls{}, comm, run, step);
  run.ddp.reset();
  return equivalence::flatten(run.final);
}

std::vector<double> trainSingleProcess(const TrainingSetup& setup) {
  return equivalence::flatten(equivalence::runReference(setup, NegativeControls{}).final);
}

}  // namespace ddph::ddp
