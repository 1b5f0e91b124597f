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
#include "ddph/verify/distributed_sampler.h"
#include "ddph/train/progress.h"
#include "model.h"
#include "training_trace.h"

namespace ddph::train {
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
  std::shared_ptr<RendezvousStore> store;
  std::unique_ptr<Communicator> comm;  ///< null for a single process without the variables
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
World describeWorld(const TrainConfig& config, const std::optional<RankEnv>& env) {
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
void connectWorld(World& world, const TrainConfig& config, const std::optional<RankEnv>& env) {
  if (!env) return;
  const auto timeout = std::chrono::milliseconds(
      static_cast<std::int64_t>(config.timeoutSeconds * 1000.0));
#if DDPH_TORCH_HAS_CUDA
  if (world.backend == Backend::kNccl) {
    world.store = makeTcpStore(env->masterAddr, env->masterPort, env->rank == 0, env->worldSize,
                               timeout);
    world.comm = connectNccl(world.store, world.rank, world.size, world.localRank, timeout,
                             "ddp-train");
    return;
  }
#endif
  RankWorld joined = initRankWorld(*env, timeout, /*perRankLoopback=*/false, config.gloo);
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

data::ImageDataset loadSplit(const TrainConfig& config, const std::string& name,
                             data::Split split) {
  if (name == "mnist") return data::loadMnist(config.mnistDir, split);
  if (name == "cifar10") return data::loadCifar10(config.cifar10Dir, split);
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

Fingerprint fingerprintOf(const TrainConfig& config, const std::vector<LoadedDataset>& datasets,
                          int worldSize) {
  Fingerprint f;
  std::string names, sizes;
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    names += (d ? "," : "") + config.datasets[d];
    sizes += (d ? "," : "") + std::to_string(datasets[d].train.size());
  }
  f["datasets"] = names;
  f["dataset_sizes"] = sizes;
  f["world_size"] = std::to_string(worldSize);
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
  if (world.comm) world.comm->allreduce(counts, ReduceOp::kSum, fmt::format("epoch {} eval", epoch));
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
// default action (terminate) stays. The recording is ddph::StopSignalScope's.

int defaultThreads(const World& world) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1, static_cast<int>(cores) / std::max(1, world.localSize));
}

}  // namespace

TrainingReport runTraining(const TrainConfig& config, const std::optional<RankEnv>& env) {
  validate(config);
  // Datasets first: a missing or corrupt file fails every rank at once, before anyone waits for
  // a peer.
  World world = describeWorld(config, env);
  torch::set_num_threads(config.threads > 0 ? config.threads : defaultThreads(world));
  std::vector<LoadedDataset> datasets = loadDatasets(config, world.device);
  connectWorld(world, config, env);
  // DDPH_AUDIT_DIR (ddp-sim launch --audit) or --trace-samples DIR: the audit trace.
  TrainingTrace audit(world.rank, world.size, config.traceSamplesPath);
  world.comm = audit.record(std::move(world.comm));
  const bool isRank0 = world.rank == 0;
  const auto dtype = config.dtype == DType::kFloat64 ? torch::kDouble : torch::kFloat;

  // The model: the same seed on every rank (DDP also broadcasts rank 0's parameters).
  std::vector<ModelInput> inputs;
  std::int64_t classes = 0;
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    inputs.push_back({config.datasets[d], datasets[d].train.shape.features()});
    classes = std::max<std::int64_t>(classes, datasets[d].train.numClasses);
  }
  torch::manual_seed(static_cast<std::uint64_t>(config.seed));
  MultiInputMlp model(inputs, config.hidden, classes);
  model->to(world.device, dtype);
  auto optimizer = makeOptimizer(config, model->parameters());

  const Fingerprint fingerprint = fingerprintOf(config, datasets, world.size);
  TrainingPosition position;
  if (!config.resumePath.empty()) {
    position = loadCheckpoint(config.resumePath, *model, *optimizer, fingerprint);
  }

  std::unique_ptr<DistributedDataParallel> ddp;
  if (world.comm) {
    DdpOptions options;
    // concat: a step holds one dataset, so the other datasets' input layers get no gradient.
    options.findUnusedParameters = config.mix == data::Mix::kConcat && datasets.size() > 1;
    ddp = std::make_unique<DistributedDataParallel>(model.ptr(), *world.comm, options);
  }
  if (audit.enabled()) {
    std::vector<std::int64_t> sizes;
    for (const auto& ds : datasets) sizes.push_back(ds.train.size());
    audit.declare(config.datasets, sizes, config.seed, config.shuffle, config.batchSize, *model);
  }

  if (isRank0) {
    std::string what;
    for (std::size_t d = 0; d < datasets.size(); ++d) {
      what += fmt::format("{}{} ({} train", d ? ", " : "", config.datasets[d], datasets[d].train.size());
      what += datasets[d].test ? fmt::format(" / {} test)", datasets[d].test->size()) : ")";
    }
    if (datasets.size() > 1) what += fmt::format(", mixed by {}", data::mixName(config.mix));
    fmt::print("ddp-train: {} rank{} ({}), {}; batch {} per rank ({} global), {} lr {}{}\n",
               world.size, world.size == 1 ? "" : "s",
               world.comm ? world.comm->backendName() : "single process", what, config.batchSize,
               config.batchSize * world.size, optimizerName(config.optimizer), config.lr,
               config.resumePath.empty()
                   ? ""
                   : fmt::format("; resumed from {} at epoch {} step {}", config.resumePath,
                                 position.epoch + 1, position.stepInEpoch));
    std::fflush(stdout);
  }
  TrainingReport report;
  report.worldSize = world.size;
  report.backend = world.comm ? world.comm->backendName() : "none";
  report.config = config;
  ProgressReporter progress(isRank0 ? config.progress : ProgressMode::kNone, stderr);
  DistributedSampler sampler(DistributedSamplerOptions{config.shuffle, /*dropLast=*/false});

  std::int64_t globalStep = position.globalStep;
  TrainingPosition current = position;  // where a checkpoint written now would resume
  std::int64_t checkpointedAt = -1;      // globalStep of this run's last checkpoint
  std::optional<StopSignalScope> stopSignals;
  if (!config.checkpointPath.empty()) stopSignals.emplace();
  int stoppedBy = 0;  // the signal every rank agreed to stop on
  auto limitReached = [&] {
    return stoppedBy != 0 || (config.steps > 0 && globalStep >= config.steps);
  };
  // Collective when the handlers are installed: see NOTE [Stopping on a signal].
  auto signalled = [&](std::int64_t epoch, std::int64_t step) {
    if (!stopSignals) return false;
    std::vector<std::int64_t> signal{stopSignals->received()};
    if (world.comm) {
      world.comm->allreduce(signal, ReduceOp::kMax,
                            fmt::format("epoch {} step {} stop check", epoch, step));
    }
    stoppedBy = static_cast<int>(signal[0]);
    return stoppedBy != 0;
  };
  auto writeCheckpoint = [&](const TrainingPosition& at) {
    if (isRank0) saveCheckpoint(config.checkpointPath, *model, *optimizer, at, fingerprint);
    checkpointedAt = at.globalStep;
  };

  for (std::int64_t epoch = position.epoch; epoch < config.epochs && !limitReached(); ++epoch) {
    // One DistributedSampler per dataset; passing the epoch is set_epoch(epoch).
    std::vector<std::vector<Index>> shards;
    for (const auto& ds : datasets) {
      shards.push_back(sampler.indices({ds.train.size(), world.size, world.rank, epoch, config.seed}));
    }
    const std::vector<data::MixedStep> plan = data::planEpoch(shards, config.batchSize, config.mix);
    const auto stepsInEpoch = static_cast<std::int64_t>(plan.size());
    if (audit.enabled()) {
      std::vector<std::int64_t> batches;  // len(loader) of each dataset's own loader
      for (const auto& shard : shards) {
        batches.push_back((static_cast<std::int64_t>(shard.size()) + config.batchSize - 1) / config.batchSize);
      }
      audit.startEpoch(epoch, batches, *model);
    }
    const bool resumedHere = epoch == position.epoch && position.stepInEpoch > 0;
    const std::int64_t firstStep = resumedHere ? std::min(position.stepInEpoch, stepsInEpoch) : 0;

    std::vector<EpochIndices> onDevice;
    for (std::size_t d = 0; d < datasets.size(); ++d) onDevice.emplace_back(plan, d, world.device);
    std::vector<data::VisitCounter> visits;
    for (const auto& ds : datasets) visits.emplace_back(ds.train.size());
    // The steps before the checkpoint were taken by the interrupted run: they count as visited.
    for (std::int64_t s = 0; s < firstStep; ++s) {
      for (std::size_t d = 0; d < datasets.size(); ++d) visits[d].visit(plan[s].batches[d]);
    }
    // Rank 0 carries the loss of the steps before the checkpoint (already summed over ranks).
    const double lossCarried = resumedHere && isRank0 ? position.epochLossSum : 0.0;
    auto lossSum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(world.device));
    std::int64_t samples = 0;

    // A checkpoint inside the epoch (collective: the epoch's loss so far is summed over ranks).
    auto checkpointAt = [&](std::int64_t stepsDone) {
      if (stepsDone >= stepsInEpoch) {
        writeCheckpoint({epoch + 1, 0, globalStep, 0.0});
        return;
      }
      std::vector<float> sum{static_cast<float>(lossSum.item<double>() + lossCarried)};
      if (world.comm) {
        world.comm->allreduce(sum, ReduceOp::kSum,
                              fmt::format("epoch {} step {} checkpoint", epoch, stepsDone));
      }
      writeCheckpoint({epoch, stepsDone, globalStep, static_cast<double>(sum[0])});
    };

    progress.startEpoch(epoch, config.epochs, firstStep, stepsInEpoch);
    const auto start = Clock::now();
    std::int64_t step = firstStep;
    for (; step < stepsInEpoch && !limitReached(); ++step) {
      if (signalled(epoch, step)) break;
      clearGradients(*model);
      torch::Tensor loss;
      for (std::size_t d = 0; d < datasets.size(); ++d) {
        const auto& batch = plan[step].batches[d];
        if (batch.empty()) continue;
        visits[d].visit(batch);
        audit.batch(epoch, d, batch);
        samples += static_cast<std::int64_t>(batch.size());
        auto idx = onDevice[d].batch(static_cast<std::size_t>(step), batch.size());
        auto logits = model->forward(d, batchInputs(datasets[d], idx, dtype));
        auto l = torch::nn::functional::cross_entropy(logits, datasets[d].trainY.index_select(0, idx));
        loss = loss.defined() ? loss + l : l;  // loss1 + loss2
      }
      loss.backward();
      optimizer->step();
      ++globalStep;
      lossSum += loss.detach().to(torch::kDouble);
      if (progress.wantsLoss(step)) {
        progress.update(step, loss.item<double>(), samples * world.size);
      }
      if (!config.checkpointPath.empty() && config.checkpointEvery > 0 &&
          globalStep % config.checkpointEvery == 0) {
        checkpointAt(step + 1);
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (audit.enabled()) {
      std::vector<std::int64_t> consumed(datasets.size(), 0), shardSizes;
      for (std::int64_t s = 0; s < step; ++s) {
        for (std::size_t d = 0; d < datasets.size(); ++d) consumed[d] += plan[s].batches[d].size();
      }
      for (const auto& shard : shards) shardSizes.push_back(static_cast<std::int64_t>(shard.size()));
      audit.endEpoch(epoch, consumed, shardSizes);
    }
    progress.finishEpoch();
    current = step >= stepsInEpoch ? TrainingPosition{epoch + 1, 0, globalStep, 0.0}
                                   : TrainingPosition{epoch, step, globalStep, 0.0};
    if (step < stepsInEpoch && !config.checkpointPath.empty() && checkpointedAt != globalStep) {
      checkpointAt(step);  // stopped by --steps or a signal inside the epoch
    }

    // The epoch's record, summed over ranks.
    EpochRecord record;
    record.epoch = epoch;
    record.firstStep = firstStep;
    record.steps = step;
    const std::string label = fmt::format("epoch {} summary", epoch);
    std::vector<float> lossTotal{static_cast<float>(lossSum.item<double>() + lossCarried)};
    std::vector<std::int64_t> sampleTotal{samples};
    if (world.comm) {
      world.comm->allreduce(lossTotal, ReduceOp::kSum, label);
      world.comm->allreduce(sampleTotal, ReduceOp::kSum, label);
    }
    record.loss = step > 0 ? lossTotal[0] / static_cast<double>(step * world.size) : 0.0;
    record.samples = sampleTotal[0];
    record.seconds = seconds;
    record.samplesPerSecond = seconds > 0 ? static_cast<double>(record.samples) / seconds : 0.0;
    for (std::size_t d = 0; d < datasets.size(); ++d) {
      if (world.comm) world.comm->allreduce(visits[d].counts(), ReduceOp::kSum, label);
      record.datasets.push_back({config.datasets[d], data::summarize(visits[d].counts())});
    }
    if (config.eval && stoppedBy == 0) {
      record.eval = evaluate(model, datasets, config, world, dtype, epoch);
      std::int64_t correct = 0, total = 0;
      for (const auto& ev : record.eval) {
        correct += ev.correct;
        total += ev.total;
      }
      record.evalAccuracy = total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
    }
    report.trainSeconds += seconds;
    report.trainSamples += record.samples;
    if (isRank0) {
      fmt::print("{}\n", epochSummaryLine(record, config.epochs));
      std::fflush(stdout);
    }
    report.epochs.push_back(std::move(record));
  }
  // The final checkpoint, at an epoch boundary (or where a resumed run found nothing left to do).
  if (!config.checkpointPath.empty() && checkpointedAt != globalStep) writeCheckpoint(current);
  report.globalSteps = globalStep;
  report.stoppedBySignal = stoppedBy;
  if (isRank0 && stoppedBy != 0) {
    fmt::print(stderr, "ddp-train: stopped by signal {} before step {}{}\n", stoppedBy, globalStep,
               config.checkpointPath.empty() ? ""
                                             : fmt::format("; resume with --resume {}",
                                                           config.checkpointPath));
  }
  report.parameters = summarizeParameters(*model);
  if (isRank0 && !config.reportJsonPath.empty()) writeReport(report, config.reportJsonPath);
  // Nobody leaves before rank 0 has written its files (a launcher may stop the world as soon as
  // one rank exits).
  if (world.comm) world.comm->barrier("end of training");
  audit.finish(*model);
  return report;
}

}  // namespace ddph::train
