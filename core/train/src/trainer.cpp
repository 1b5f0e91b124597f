#include "ddph/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "checkpoint.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/ddp/nccl_communicator.h"
#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "ddph/common/stop_signals.h"
#include "ddph/config.h"
#include "ddph/data/dataset_mix.h"
#include "ddph/data/image_dataset.h"
#include "ddph/ddp/distributed_data_parallel.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/elastic_sampler.h"
#include "ddph/train/progress.h"
#include "ddph/train/training_page.h"
#include "model.h"
#include "resume_state.h"
#include "training_trace.h"

namespace ddph::train {

using common::StopSignalScope;
using sampler::distributedEpochOrder;
using sampler::DistributedSamplerOptions;
using sampler::distributedTotalSize;
using sampler::elasticRunStart;
using sampler::ElasticSampler;
using sampler::Index;
using sampler::ResumePoint;

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kEvalBatch = 1000;

// ---- The world this rank trains in ------------------------------------------------------------

struct World {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  Backend backend = Backend::kGloo;
  torch::Device device{torch::kCPU};
  std::shared_ptr<comm::RendezvousStore> store;
  std::unique_ptr<comm::Communicator> comm;  ///< null for a single process without the variables
};

bool cudaUsable() {
#if DDPH_TORCH_HAS_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

Backend resolveBackend(Backend requested) {
  if (requested == Backend::kAuto) return cudaUsable() ? Backend::kNccl : Backend::kGloo;
  if (requested == Backend::kNccl) {
    DDPH_CHECK(DDPH_TORCH_HAS_CUDA, "--backend nccl needs a LibTorch built with CUDA; this build "
                                    "has LibTorch {} without CUDA (use --backend gloo)",
               DDPH_TORCH_VERSION);
    DDPH_CHECK(cudaUsable(), "--backend nccl needs a CUDA device; none is available");
  }
  return requested;
}

/// Who and where this rank is; no communication yet.
World describeWorld(const TrainConfig& config, const std::optional<comm::RankEnv>& env) {
  World world;
  world.backend = resolveBackend(config.backend);
  if (env) {
    world.rank = env->rank;
    world.size = env->worldSize;
    world.localRank = env->localRank;
    world.localSize = env->localWorldSize;
  }
#if DDPH_TORCH_HAS_CUDA
  if (world.backend == Backend::kNccl) {
    const int devices = static_cast<int>(torch::cuda::device_count());
    DDPH_CHECK(world.localRank < devices, "LOCAL_RANK {} has no GPU: this machine has {}",
               world.localRank, devices);
    world.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(world.localRank));
  }
#endif
  return world;
}

/// env:// init, as torchrun's ranks do it: rank 0 hosts the store, everyone joins the group.
void connectWorld(World& world, const TrainConfig& config,
                  const std::optional<comm::RankEnv>& env) {
  if (!env) return;
  const auto timeout = std::chrono::milliseconds(
      static_cast<std::int64_t>(config.timeoutSeconds * 1000.0));
#if DDPH_TORCH_HAS_CUDA
  if (world.backend == Backend::kNccl) {
    world.store = comm::makeTcpStore(env->masterAddr, env->masterPort, env->rank == 0,
                                     env->worldSize, timeout);
    world.comm = ddp::connectNccl(world.store, world.rank, world.size, world.localRank, timeout,
                                  "ddp-train");
    return;
  }
#endif
  comm::RankWorld joined =
      comm::initRankWorld(*env, timeout, /*perRankLoopback=*/false, config.gloo);
  world.store = std::move(joined.store);
  world.comm = std::move(joined.comm);
}

// ---- Data ---------------------------------------------------------------------------------------

struct LoadedDataset {
  data::ImageDataset train;
  std::optional<data::ImageDataset> test;
  torch::Tensor trainX, trainY;  ///< uint8 [N, F] and int64 [N], on the training device
  torch::Tensor testX, testY;
};

// The data folder of this build's checkout (<checkout>/build/bin/ddp-train:
// <checkout>/data/SUBFOLDER) when it exists, else empty.
std::filesystem::path checkoutDataFolder(const std::string& subfolder) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path folder = exe.parent_path().parent_path().parent_path() / "data" / subfolder;
  return std::filesystem::is_directory(folder, ec) ? folder : std::filesystem::path{};
}

// A dataset folder that does not exist: one line naming the option that chooses it (the default
// is relative to the current folder, so a run from elsewhere misses the checkout's files).
struct DataFolder {
  const char* name;       ///< "mnist"
  const char* option;     ///< "--mnist-dir"
  const char* subfolder;  ///< under the checkout's data/
  const char* fetch;      ///< how to get the files, after "or fetch them"
};

void checkDataFolder(const std::string& dir, const DataFolder& what) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) return;
  const std::filesystem::path here = checkoutDataFolder(what.subfolder);
  const char* option = what.option;
  throw common::ConfigError(fmt::format(
      "{}: missing: no such folder (in {}): give the folder that holds {}'s files with {} DIR{}",
      dir, std::filesystem::current_path(ec).string(), what.name, option,
      here.empty() ? fmt::format(", or fetch them{}", what.fetch)
                   : fmt::format(" (this build's checkout has them: {} {})", option, here.string())));
}

data::ImageDataset loadSplit(const TrainConfig& config, const std::string& name,
                             data::Split split) {
  if (name == "mnist") {
    checkDataFolder(config.mnistDir, {"mnist", "--mnist-dir", "mnist",
                                      " with scripts/fetch-mnist.sh (into the checkout's data/mnist)"});
    return data::loadMnist(config.mnistDir, split);
  }
  if (name == "cifar10") {
    checkDataFolder(config.cifar10Dir, {"cifar10", "--cifar10-dir", "cifar-10-batches-bin",
                                         " (CIFAR-10's binary version: data_batch_K.bin, test_batch.bin)"});
    return data::loadCifar10(config.cifar10Dir, split);
  }
  const std::int64_t size =
      split == data::Split::kTrain ? config.datasetSize : std::max<std::int64_t>(1, config.datasetSize / 5);
  return data::makeSynthetic(size, static_cast<std::uint64_t>(config.seed), split);
}

std::pair<torch::Tensor, torch::Tensor> toTensors(data::ImageDataset& ds, torch::Device device) {
  const std::int64_t n = ds.size();
  auto x = torch::from_blob(ds.pixels.data(), {n, ds.shape.features()}, torch::kUInt8);
  auto y = torch::from_blob(ds.labels.data(), {n}, torch::kUInt8).to(torch::kLong);
  // On the CPU `x` stays a view of the dataset's bytes (the dataset outlives it).
  return {device.is_cpu() ? x : x.to(device), y.to(device)};
}

std::vector<LoadedDataset> loadDatasets(const TrainConfig& config, torch::Device device) {
  std::vector<LoadedDataset> out(config.datasets.size());
  for (std::size_t d = 0; d < config.datasets.size(); ++d) {
    out[d].train = loadSplit(config, config.datasets[d], data::Split::kTrain);
    DDPH_CHECK(out[d].train.size() > 0, "dataset {} has no training samples", config.datasets[d]);
    std::tie(out[d].trainX, out[d].trainY) = toTensors(out[d].train, device);
    if (config.eval) {
      out[d].test = loadSplit(config, config.datasets[d], data::Split::kTest);
      std::tie(out[d].testX, out[d].testY) = toTensors(*out[d].test, device);
    }
  }
  return out;
}

/// NOTE [Indices on the device]: the epoch's indices of one dataset, every step's batch one after
/// the other, uploaded once per epoch; a step takes its batch as a slice. One host-to-device copy
/// a step (from pageable memory, so synchronous) would make the host wait for the GPU every step;
/// Python's hand-written loop in benchmarks/train_throughput.py also indexes on the device.
static_assert(sizeof(Index) == sizeof(std::int64_t), "indices are uploaded as int64 tensors");
class EpochIndices {
 public:
  EpochIndices(const std::vector<data::MixedStep>& plan, std::size_t dataset, torch::Device device) {
    for (const auto& step : plan) {
      offsets_.push_back(static_cast<std::int64_t>(flat_.size()));
      const auto& batch = step.batches[dataset];
      flat_.insert(flat_.end(), batch.begin(), batch.end());
    }
    all_ = torch::from_blob(flat_.data(), {static_cast<std::int64_t>(flat_.size())}, torch::kLong);
    if (!device.is_cpu()) all_ = all_.to(device);
  }
  // On the CPU all_ points into flat_: a move keeps flat_'s buffer, a copy would not.
  EpochIndices(const EpochIndices&) = delete;
  EpochIndices& operator=(const EpochIndices&) = delete;
  EpochIndices(EpochIndices&&) = default;
  EpochIndices& operator=(EpochIndices&&) = default;

  /// Step `step`'s batch (plan[step].batches[dataset]) as a tensor on the device.
  torch::Tensor batch(std::size_t step, std::size_t size) const {
    return all_.narrow(0, offsets_[step], static_cast<std::int64_t>(size));
  }

 private:
  std::vector<Index> flat_;  ///< backs all_ on the CPU
  std::vector<std::int64_t> offsets_;
  torch::Tensor all_;
};

torch::Tensor batchInputs(const LoadedDataset& ds, const torch::Tensor& idx, torch::ScalarType dtype) {
  return ds.trainX.index_select(0, idx).to(dtype).div_(255.0);
}

// ---- Pieces of the loop ------------------------------------------------------------------------

Fingerprint fingerprintOf(const TrainConfig& config, const std::vector<LoadedDataset>& datasets) {
  Fingerprint f;
  std::string names, sizes;
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    names += (d ? "," : "") + config.datasets[d];
    sizes += (d ? "," : "") + std::to_string(datasets[d].train.size());
  }
  f["datasets"] = names;
  f["dataset_sizes"] = sizes;
  // Not the world size: a checkpoint resumes on another one elastically (NOTE [Elastic resume]).
  f["batch_size"] = std::to_string(config.batchSize);
  f["mix"] = data::mixName(config.mix);
  f["seed"] = std::to_string(config.seed);
  f["shuffle"] = config.shuffle ? "true" : "false";
  f["optimizer"] = optimizerName(config.optimizer);
  f["hidden"] = std::to_string(config.hidden);
  f["dtype"] = dtypeName(config.dtype);
  return f;
}

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const TrainConfig& config,
                                                       std::vector<torch::Tensor> params) {
  if (config.optimizer == OptimizerKind::kAdam) {
    return std::make_unique<torch::optim::Adam>(std::move(params),
                                                torch::optim::AdamOptions(config.lr));
  }
  return std::make_unique<torch::optim::SGD>(
      std::move(params), torch::optim::SGDOptions(config.lr).momentum(config.momentum));
}

/// Sets every gradient to undefined (PyTorch's zero_grad(set_to_none=True)): a parameter that a
/// step does not use then keeps no gradient, and the optimizer skips it on every rank alike.
void clearGradients(torch::nn::Module& model) {
  for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
}

/// Exactly-once evaluation: rank r takes test samples r, r + W, r + 2W, … (no padding), and the
/// counts are summed over ranks. Returns (correct, total) per dataset.
std::vector<DatasetEval> evaluate(MultiInputMlp& model, const std::vector<LoadedDataset>& datasets,
                                  const TrainConfig& config, World& world, torch::ScalarType dtype,
                                  std::int64_t epoch) {
  torch::NoGradGuard noGrad;
  std::vector<std::int64_t> counts;
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    const auto& ds = datasets[d];
    const std::int64_t n = ds.test->size();
    std::int64_t correct = 0, total = 0;
    auto mine = torch::arange(world.rank, n, world.size, torch::kLong).to(world.device);
    for (std::int64_t start = 0; start < mine.size(0); start += kEvalBatch) {
      auto idx = mine.slice(0, start, std::min<std::int64_t>(start + kEvalBatch, mine.size(0)));
      auto x = ds.testX.index_select(0, idx).to(dtype).div_(255.0);
      auto y = ds.testY.index_select(0, idx);
      auto predicted = model->forward(d, x).argmax(1);
      correct += predicted.eq(y).sum().item<std::int64_t>();
      total += idx.size(0);
    }
    counts.push_back(correct);
    counts.push_back(total);
  }
  if (world.comm)
    world.comm->allreduce(counts, comm::ReduceOp::kSum, fmt::format("epoch {} eval", epoch));
  std::vector<DatasetEval> out;
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    DatasetEval ev;
    ev.dataset = config.datasets[d];
    ev.correct = counts[2 * d];
    ev.total = counts[2 * d + 1];
    ev.paddingAvoided = distributedTotalSize(datasets[d].test->size(), world.size, false) -
                        datasets[d].test->size();
    out.push_back(ev);
  }
  return out;
}

std::vector<ParameterSummary> summarizeParameters(torch::nn::Module& model) {
  torch::NoGradGuard noGrad;
  std::vector<ParameterSummary> out;
  for (const auto& item : model.named_parameters()) {
    auto p = item.value().to(torch::kCPU, torch::kDouble);
    out.push_back({item.key(), p.sum().item<double>(), p.norm().item<double>()});
  }
  return out;
}

// NOTE [Stopping on a signal]: with --checkpoint, SIGINT and SIGTERM do not kill the rank: the
// handler only records the signal, and before every step the ranks allreduce (max) what they
// recorded, so that all of them stop before the same step even when the signal reached them at
// different moments (or reached only one). Rank 0 then writes the checkpoint at that position and
// every rank exits with 128 + the signal. Without --checkpoint there is nothing to save and the
// default action (terminate) stays. The recording is ddph::common::StopSignalScope's.

int defaultThreads(const World& world) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1, static_cast<int>(cores) / std::max(1, world.localSize));
}

// NOTE [Stopping on a signal] (above): the ranks agree, before every step, on whether a signal
// arrived; SIGINT and SIGTERM are only recorded while a checkpoint can be written.
class StopAgreement {
 public:
  explicit StopAgreement(bool withCheckpoint) {
    if (withCheckpoint) signals_.emplace();
  }
  /// Collective when the handlers are installed: every rank stops before the same step.
  bool agreed(comm::Communicator* comm, std::int64_t epoch, std::int64_t step) {
    if (!signals_) return false;
    std::vector<std::int64_t> signal{signals_->received()};
    if (comm) {
      comm->allreduce(signal, comm::ReduceOp::kMax,
                      fmt::format("epoch {} step {} stop check", epoch, step));
    }
    stoppedBy_ = static_cast<int>(signal[0]);
    return stoppedBy_ != 0;
  }
  /// The signal every rank agreed to stop on, 0 while none.
  int stoppedBy() const { return stoppedBy_; }

 private:
  std::optional<StopSignalScope> signals_;
  int stoppedBy_ = 0;
};

/// What a run is made of, built by setUpRun in the order its side effects need.
struct RunParts {
  World world;
  std::vector<LoadedDataset> datasets;
  std::unique_ptr<TrainingTrace> audit;
  MultiInputMlp model{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<StopAgreement> stop;
  ResumeState resume;
  std::unique_ptr<ddp::DistributedDataParallel> ddp;
};

// The same seed on every rank (DDP also broadcasts rank 0's parameters).
MultiInputMlp makeModel(const TrainConfig& config, const std::vector<LoadedDataset>& datasets,
                        const World& world, torch::ScalarType dtype) {
  std::vector<ModelInput> inputs;
  std::int64_t classes = 0;
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    inputs.push_back({config.datasets[d], datasets[d].train.shape.features()});
    classes = std::max<std::int64_t>(classes, datasets[d].train.numClasses);
  }
  torch::manual_seed(static_cast<std::uint64_t>(config.seed));
  MultiInputMlp model(inputs, config.hidden, classes);
  model->to(world.device, dtype);
  return model;
}

torch::ScalarType torchDtype(const TrainConfig& config) {
  return config.dtype == DType::kFloat64 ? torch::kDouble : torch::kFloat;
}

/// NOTE [Setting up a run]: the steps have side effects and run in this order: torch's threads
/// before any torch work; the datasets before joining the world, so that a missing or corrupt
/// file fails every rank at once, before anyone waits for a peer; the trace once the rank is
/// known and before the first collective (it records them); the signal handlers (NOTE [Stopping
/// on a signal]) before the checkpoint loads and DDP's first broadcast; DDP once the model holds
/// the checkpoint's weights; the trace's declarations last, over the DDP module.
RunParts setUpRun(const TrainConfig& config, const std::optional<comm::RankEnv>& env) {
  RunParts run;
  // 1. Who and where this rank is (no communication), and torch's intra-op threads.
  run.world = describeWorld(config, env);
  torch::set_num_threads(config.threads > 0 ? config.threads : defaultThreads(run.world));
  // 2. The datasets.
  run.datasets = loadDatasets(config, run.world.device);
  // 3. Join the world (env://), then record its collectives in the audit trace (DDPH_AUDIT_DIR,
  //    ddp-sim launch --audit, or --trace-samples DIR).
  connectWorld(run.world, config, env);
  run.audit = std::make_unique<TrainingTrace>(run.world.rank, run.world.size,
                                              config.traceSamplesPath);
  run.world.comm = run.audit->record(std::move(run.world.comm));
  // 4. The model, its optimizer, and the signal handlers while a checkpoint can be written.
  run.model = makeModel(config, run.datasets, run.world, torchDtype(config));
  run.optimizer = makeOptimizer(config, run.model->parameters());
  Fingerprint fingerprint = fingerprintOf(config, run.datasets);
  run.stop = std::make_unique<StopAgreement>(!config.checkpointPath.empty());
  // 5. --resume: the checkpoint's weights, optimizer state and position (elastic on another
  //    world size).
  TrainingPosition loaded;
  if (!config.resumePath.empty()) {
    loaded = loadCheckpoint(config.resumePath, *run.model, *run.optimizer, fingerprint);
  }
  std::vector<std::int64_t> trainSizes;
  for (const auto& ds : run.datasets) trainSizes.push_back(ds.train.size());
  run.resume = startFrom(std::move(loaded), std::move(fingerprint), config, trainSizes,
                         run.world.size);
  // 6. DDP over the (recorded) communicator.
  if (run.world.comm) {
    ddp::DdpOptions options;
    // concat: a step holds one dataset, so the other datasets' input layers get no gradient.
    options.findUnusedParameters = config.mix == data::Mix::kConcat && run.datasets.size() > 1;
    run.ddp =
        std::make_unique<ddp::DistributedDataParallel>(run.model.ptr(), *run.world.comm, options);
  }
  // 7. The trace's samplers, loaders and DDP module.
  if (run.audit->enabled()) {
    run.audit->declare(config.datasets, trainSizes, config.seed, config.shuffle, config.batchSize,
                       *run.model);
  }
  return run;
}

// One epoch's state while it runs.
struct Epoch {
  std::int64_t index = 0;
  std::vector<std::vector<Index>> shards;
  std::vector<std::vector<ResumePoint>> history;  // per dataset: the epoch's earlier runs
  std::vector<data::MixedStep> plan;
  std::int64_t firstStep = 0;
  std::vector<data::VisitCounter> visits;
  double lossCarried = 0;  // rank 0: the loss of the steps before the checkpoint
  std::int64_t lossTermsCarried = 0;  // how many step losses lossCarried sums (all ranks)
  torch::Tensor lossSum;
  std::int64_t samples = 0;
  // With --report-html, per step this run took: its loss (on the device, read once at the end),
  // its samples and the wall time since the previous step ended.
  std::vector<torch::Tensor> stepLoss;
  std::vector<std::int64_t> stepSamples;
  std::vector<double> stepSeconds;
  std::int64_t stepsInEpoch() const { return static_cast<std::int64_t>(plan.size()); }
};

// Per dataset (of `datasets`): the samples this rank took in the first `steps` steps of `e`.
std::vector<std::int64_t> consumedIn(const Epoch& e, std::int64_t steps, std::size_t datasets) {
  std::vector<std::int64_t> consumed(datasets, 0);
  for (std::int64_t s = 0; s < steps; ++s) {
    for (std::size_t d = 0; d < datasets; ++d) {
      consumed[d] += static_cast<std::int64_t>(e.plan[static_cast<std::size_t>(s)].batches[d].size());
    }
  }
  return consumed;
}

// The steps this run took in `e` (--report-html), their losses and samples summed over ranks:
// one collective per epoch, not one per step. Every rank took the same steps; the last of them
// is global step `globalStep`.
std::vector<StepRecord> stepLog(const Epoch& e, const std::string& label, const World& world,
                                std::int64_t globalStep) {
  if (e.stepLoss.empty()) return {};
  const auto losses = torch::stack(e.stepLoss).to(torch::kCPU, torch::kDouble).contiguous();
  std::vector<double> loss(losses.data_ptr<double>(), losses.data_ptr<double>() + losses.numel());
  std::vector<std::int64_t> samples = e.stepSamples;
  if (world.comm) {
    world.comm->allreduce(loss, comm::ReduceOp::kSum, label);
    world.comm->allreduce(samples, comm::ReduceOp::kSum, label);
  }
  std::vector<StepRecord> log;
  const std::int64_t firstGlobal = globalStep - static_cast<std::int64_t>(loss.size()) + 1;
  for (std::size_t i = 0; i < loss.size(); ++i) {
    log.push_back({firstGlobal + static_cast<std::int64_t>(i), loss[i] / world.size, samples[i],
                   e.stepSeconds[i]});
  }
  return log;
}

/// One run of runTraining: the world, the model and its optimizer, the datasets, and where the
/// run stands (ResumeState). run() trains epoch after epoch; each epoch is runEpoch (its steps),
/// then its record summed over ranks (epochRecord).
class TrainingRun {
 public:
  TrainingRun(const TrainConfig& config, RunParts parts)
      : config_(config),
        world_(std::move(parts.world)),
        datasets_(std::move(parts.datasets)),
        audit_(std::move(parts.audit)),
        isRank0_(world_.rank == 0),
        dtype_(torchDtype(config)),
        model_(std::move(parts.model)),
        optimizer_(std::move(parts.optimizer)),
        stop_(std::move(parts.stop)),
        resume_(std::move(parts.resume)),
        ddp_(std::move(parts.ddp)) {}

  TrainingReport run() {
    announce();
    TrainingReport report;
    report.worldSize = world_.size;
    report.backend = world_.comm ? world_.comm->backendName() : "none";
    report.config = config_;
    for (std::int64_t epoch = resume_.start.epoch; epoch < config_.epochs && !limitReached(); ++epoch) {
      EpochRecord record = runEpoch(epoch);
      report.trainSeconds += record.seconds;
      report.trainSamples += record.samples;
      if (isRank0_) {
        fmt::print("{}\n", epochSummaryLine(record, config_.epochs));
        std::fflush(stdout);
      }
      report.epochs.push_back(std::move(record));
    }
    // The final checkpoint, at an epoch boundary (or where a resumed run found nothing to do).
    if (!config_.checkpointPath.empty() && resume_.checkpointedAt != resume_.globalStep) {
      writeCheckpoint(resume_.current);
    }
    report.globalSteps = resume_.globalStep;
    report.stoppedBySignal = stop_->stoppedBy();
    if (isRank0_ && stop_->stoppedBy() != 0) {
      fmt::print(stderr, "ddp-train: stopped by signal {} before step {}{}\n", stop_->stoppedBy(),
                 resume_.globalStep,
                 config_.checkpointPath.empty()
                     ? ""
                     : fmt::format("; resume with --resume {}", config_.checkpointPath));
    }
    report.parameters = summarizeParameters(*model_);
    if (isRank0_ && !config_.reportJsonPath.empty()) writeReport(report, config_.reportJsonPath);
    if (isRank0_ && !config_.reportHtmlPath.empty()) writeTrainingPage(report, config_.reportHtmlPath);
    // Nobody leaves before rank 0 has written its files (a launcher may stop the world as soon as
    // one rank exits).
    if (world_.comm) world_.comm->barrier("end of training");
    audit_->finish(*model_);
    return report;
  }

 private:
  void announce() const {
    if (!isRank0_) return;
    std::string what;
    for (std::size_t d = 0; d < datasets_.size(); ++d) {
      what += fmt::format("{}{} ({} train", d ? ", " : "", config_.datasets[d],
                          datasets_[d].train.size());
      what += datasets_[d].test ? fmt::format(" / {} test)", datasets_[d].test->size()) : ")";
    }
    if (datasets_.size() > 1) what += fmt::format(", mixed by {}", data::mixName(config_.mix));
    fmt::print("ddp-train: {} rank{} ({}), {}; batch {} per rank ({} global), {} lr {}{}\n",
               world_.size, world_.size == 1 ? "" : "s",
               world_.comm ? world_.comm->backendName() : "single process", what,
               config_.batchSize, config_.batchSize * world_.size,
               optimizerName(config_.optimizer), config_.lr,
               config_.resumePath.empty() ? "" : resumedFromText(resume_, config_));
    std::fflush(stdout);
  }

  bool limitReached() const {
    return stop_->stoppedBy() != 0 || (config_.steps > 0 && resume_.globalStep >= config_.steps);
  }

  // Where a checkpoint written after `stepsDone` steps of `e` resumes.
  TrainingPosition positionAfter(const Epoch& e, std::int64_t stepsDone, double lossSum) const {
    TrainingPosition p;
    p.worldSize = world_.size;
    p.globalStep = resume_.globalStep;
    if (stepsDone >= e.stepsInEpoch()) {
      p.epoch = e.index + 1;
      return p;
    }
    p.epoch = e.index;
    p.stepInEpoch = stepsDone;
    p.epochLossSum = lossSum;
    p.epochLossTerms = e.lossTermsCarried + (stepsDone - e.firstStep) * world_.size;
    p.history = e.history;
    p.consumed = consumedIn(e, stepsDone, datasets_.size());
    return p;
  }

  void writeCheckpoint(const TrainingPosition& at) {
    if (isRank0_) saveCheckpoint(config_.checkpointPath, *model_, *optimizer_, at, resume_.fingerprint);
    resume_.checkpointedAt = at.globalStep;
  }

  // A checkpoint after `stepsDone` steps of `e` (collective inside the epoch: the epoch's loss so
  // far is summed over ranks).
  void checkpointAt(const Epoch& e, std::int64_t stepsDone) {
    if (stepsDone >= e.stepsInEpoch()) {
      writeCheckpoint(positionAfter(e, stepsDone, 0.0));
      return;
    }
    std::vector<float> sum{static_cast<float>(e.lossSum.item<double>() + e.lossCarried)};
    if (world_.comm) {
      world_.comm->allreduce(sum, comm::ReduceOp::kSum,
                             fmt::format("epoch {} step {} checkpoint", e.index, stepsDone));
    }
    writeCheckpoint(positionAfter(e, stepsDone, static_cast<double>(sum[0])));
  }

  // One sampler per dataset (passing the epoch is set_epoch(epoch)): DistributedSampler's order,
  // elastic where the epoch's earlier runs were on other world sizes (NOTE [Elastic resume]);
  // the steps planned by the mix, and what a resumed run already did.
  Epoch planEpoch(std::int64_t epoch) {
    const DistributedSamplerOptions options{config_.shuffle, /*dropLast=*/false};
    ElasticSampler sampler(options);
    Epoch e;
    e.index = epoch;
    if (epoch == resume_.start.epoch) e.history = resume_.start.history;
    e.history.resize(datasets_.size());
    for (std::size_t d = 0; d < datasets_.size(); ++d) {
      e.shards.push_back(sampler.indices({datasets_[d].train.size(), world_.size, world_.rank,
                                          epoch, config_.seed, e.history[d]}));
    }
    e.plan = data::planEpoch(e.shards, config_.batchSize, config_.mix);
    const bool resumedHere =
        epoch == resume_.start.epoch && (resume_.start.stepInEpoch > 0 || resume_.elasticFrom != 0);
    e.firstStep = resumedHere ? std::min(resume_.start.stepInEpoch, e.stepsInEpoch()) : 0;
    for (const auto& ds : datasets_) e.visits.emplace_back(ds.train.size());
    // The steps before the checkpoint were taken by the interrupted run: they count as visited.
    for (std::int64_t s = 0; s < e.firstStep; ++s) {
      for (std::size_t d = 0; d < datasets_.size(); ++d) e.visits[d].visit(e.plan[s].batches[d]);
    }
    // So were the positions the earlier runs on other world sizes took (counted once, on rank 0).
    for (std::size_t d = 0; d < datasets_.size() && isRank0_; ++d) {
      const std::int64_t n = datasets_[d].train.size();
      const std::int64_t start = elasticRunStart(n, e.history[d], false);
      if (start == 0) continue;
      const auto order = distributedEpochOrder(n, config_.seed, epoch, options);
      e.visits[d].visit(std::vector<Index>(order.begin(), order.begin() + start));
    }
    // Rank 0 carries the loss of the steps before the checkpoint (already summed over ranks).
    e.lossCarried = resumedHere && isRank0_ ? resume_.start.epochLossSum : 0.0;
    if (resumedHere) {
      e.lossTermsCarried = resume_.start.epochLossTerms != 0 ? resume_.start.epochLossTerms
                                                         : e.firstStep * world_.size;
    }
    e.lossSum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(world_.device));
    return e;
  }

  // One optimizer step: every dataset's batch of this step, loss1 + loss2, backward, step.
  torch::Tensor trainStep(Epoch& e, std::int64_t step, std::vector<EpochIndices>& onDevice) {
    clearGradients(*model_);
    torch::Tensor loss;
    for (std::size_t d = 0; d < datasets_.size(); ++d) {
      const auto& batch = e.plan[step].batches[d];
      if (batch.empty()) continue;
      e.visits[d].visit(batch);
      audit_->batch(e.index, d, batch);
      e.samples += static_cast<std::int64_t>(batch.size());
      auto idx = onDevice[d].batch(static_cast<std::size_t>(step), batch.size());
      auto logits = model_->forward(d, batchInputs(datasets_[d], idx, dtype_));
      auto l = torch::nn::functional::cross_entropy(logits, datasets_[d].trainY.index_select(0, idx));
      loss = loss.defined() ? loss + l : l;
    }
    loss.backward();
    optimizer_->step();
    ++resume_.globalStep;
    e.lossSum += loss.detach().to(torch::kDouble);
    return loss;
  }

  EpochRecord runEpoch(std::int64_t epoch) {
    Epoch e = planEpoch(epoch);
    if (audit_->enabled()) {
      std::vector<std::int64_t> batches;  // len(loader) of each dataset's own loader
      for (const auto& shard : e.shards) {
        batches.push_back((static_cast<std::int64_t>(shard.size()) + config_.batchSize - 1) /
                          config_.batchSize);
      }
      audit_->startEpoch(epoch, batches, *model_);
    }
    std::vector<EpochIndices> onDevice;
    for (std::size_t d = 0; d < datasets_.size(); ++d) onDevice.emplace_back(e.plan, d, world_.device);

    progress_.startEpoch(epoch, config_.epochs, e.firstStep, e.stepsInEpoch());
    const auto start = Clock::now();
    auto stepStart = start;
    std::int64_t step = e.firstStep;
    for (; step < e.stepsInEpoch() && !limitReached(); ++step) {
      if (stop_->agreed(world_.comm.get(), epoch, step)) break;
      const std::int64_t samplesBefore = e.samples;
      const torch::Tensor loss = trainStep(e, step, onDevice);
      if (!config_.reportHtmlPath.empty()) {
        const auto now = Clock::now();
        e.stepLoss.push_back(loss.detach());
        e.stepSamples.push_back(e.samples - samplesBefore);
        e.stepSeconds.push_back(std::chrono::duration<double>(now - stepStart).count());
        stepStart = now;
      }
      if (progress_.wantsLoss(step)) {
        progress_.update(step, loss.item<double>(), e.samples * world_.size);
      }
      if (!config_.checkpointPath.empty() && config_.checkpointEvery > 0 &&
          resume_.globalStep % config_.checkpointEvery == 0) {
        checkpointAt(e, step + 1);
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (audit_->enabled()) {
      std::vector<std::int64_t> shardSizes;
      for (const auto& shard : e.shards) shardSizes.push_back(static_cast<std::int64_t>(shard.size()));
      audit_->endEpoch(epoch, consumedIn(e, step, datasets_.size()), shardSizes);
    }
    progress_.finishEpoch();
    resume_.current = positionAfter(e, step, 0.0);
    if (step < e.stepsInEpoch() && !config_.checkpointPath.empty() && resume_.checkpointedAt != resume_.globalStep) {
      checkpointAt(e, step);  // stopped by --steps or a signal inside the epoch
    }
    return epochRecord(e, step, seconds);
  }

  // The epoch's record, summed over ranks, with the evaluation unless the run is stopping.
  EpochRecord epochRecord(Epoch& e, std::int64_t steps, double seconds) {
    EpochRecord record;
    record.epoch = e.index;
    record.firstStep = e.firstStep;
    record.steps = steps;
    record.plannedSteps = e.stepsInEpoch();
    const std::string label = fmt::format("epoch {} summary", e.index);
    std::vector<float> lossTotal{static_cast<float>(e.lossSum.item<double>() + e.lossCarried)};
    std::vector<std::int64_t> sampleTotal{e.samples};
    if (world_.comm) {
      world_.comm->allreduce(lossTotal, comm::ReduceOp::kSum, label);
      world_.comm->allreduce(sampleTotal, comm::ReduceOp::kSum, label);
    }
    const std::int64_t terms = e.lossTermsCarried + (steps - e.firstStep) * world_.size;
    record.loss = terms > 0 ? lossTotal[0] / static_cast<double>(terms) : 0.0;
    record.samples = sampleTotal[0];
    record.seconds = seconds;
    record.samplesPerSecond = seconds > 0 ? static_cast<double>(record.samples) / seconds : 0.0;
    record.stepLog = stepLog(e, label, world_, resume_.globalStep);
    for (std::size_t d = 0; d < datasets_.size(); ++d) {
      if (world_.comm) world_.comm->allreduce(e.visits[d].counts(), comm::ReduceOp::kSum, label);
      record.datasets.push_back({config_.datasets[d], data::summarize(e.visits[d].counts())});
    }
    if (config_.eval && stop_->stoppedBy() == 0) {
      record.eval = evaluate(model_, datasets_, config_, world_, dtype_, e.index);
      std::int64_t correct = 0, total = 0;
      for (const auto& ev : record.eval) {
        correct += ev.correct;
        total += ev.total;
      }
      record.evalAccuracy = total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
    }
    return record;
  }

  const TrainConfig& config_;
  // Destroyed in reverse: DDP and the trace's communicator before the trace, the world last.
  World world_;
  std::vector<LoadedDataset> datasets_;
  std::unique_ptr<TrainingTrace> audit_;
  bool isRank0_;
  torch::ScalarType dtype_;
  MultiInputMlp model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<StopAgreement> stop_;
  ResumeState resume_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  ProgressReporter progress_{isRank0_ ? config_.progress : ProgressMode::kNone, stderr};
};

}  // namespace

TrainingReport runTraining(const TrainConfig& config, const std::optional<comm::RankEnv>& env) {
  validate(config);
  return TrainingRun(config, setUpRun(config, env)).run();
}

}  // namespace ddph::train
