#include "training_trace.h"

#include <fmt/format.h>

#include <functional>
#include <string_view>

#include "ddph/trace/recording_communicator.h"
#include "ddph/config.h"

namespace ddph::train {

using sampler::Index;

TrainingTrace::TrainingTrace(int rank, int worldSize, const std::string& samplesDir)
    : writer_(trace::TraceWriter::fromEnvironment(
          rank, worldSize, std::string("ddp-train ") + DDPH_VERSION, samplesDir)),
      rank_(rank),
      worldSize_(worldSize),
      indices_(!samplesDir.empty()) {}

std::unique_ptr<comm::Communicator> TrainingTrace::record(
    std::unique_ptr<comm::Communicator> comm) {
  if (!writer_ || !comm) return comm;
  return std::make_unique<trace::RecordingCommunicator>(std::move(comm), *writer_, /*ddpModule=*/0);
}

void TrainingTrace::declare(const std::vector<std::string>& names,
                            const std::vector<std::int64_t>& sizes, std::int64_t seed, bool shuffle,
                            std::int64_t batchSize, torch::nn::Module& model) {
  if (!writer_) return;
  sizes_ = sizes;
  seed_ = seed;
  shuffle_ = shuffle;
  for (std::size_t d = 0; d < names.size(); ++d) {
    trace::SamplerInfo s;
    s.className = "ddph::DistributedSampler";
    s.datasetLen = sizes[d];
    s.numReplicas = worldSize_;
    s.rank = rank_;
    s.seed = seed;
    s.shuffle = shuffle;
    s.dropLast = false;
    samplers_.push_back(writer_->addSampler(s));
    trace::LoaderInfo l;
    l.sampler = samplers_.back();
    l.dataset = names[d];
    l.datasetLen = sizes[d];
    l.batchSize = batchSize;
    // Every mix takes each dataset's batches as consecutive slices of its shard (cycle starts
    // over at the shard's head): the verifier derives each batch from the sampler's order.
    l.torchBatching = !indices_;
    loaders_.push_back(writer_->addLoader(l));
  }
  std::int64_t parameters = 0;
  for (const auto& p : model.parameters()) parameters += p.numel();
  ddp_ = writer_->addDdp(model.name(), parameters);
}

void TrainingTrace::startEpoch(std::int64_t epoch, const std::vector<std::int64_t>& batches,
                               torch::nn::Module& model) {
  if (!writer_) return;
  const std::string hash = stateHash(model);
  batchSeq_.assign(loaders_.size(), 0);
  for (std::size_t d = 0; d < loaders_.size(); ++d) {
    writer_->setEpoch(samplers_[d], epoch);
    trace::PassInfo p;
    p.loader = loaders_[d];
    p.iter = epoch;
    p.samplerEpoch = epoch;
    p.seed = seed_;
    p.numReplicas = worldSize_;
    p.rank = rank_;
    p.shuffle = shuffle_;
    p.dropLast = false;
    p.datasetLen = sizes_[d];
    p.batches = batches[d];
    p.params[ddp_] = hash;
    writer_->startPass(p);
  }
}

void TrainingTrace::batch(std::int64_t epoch, std::size_t dataset, const std::vector<Index>& indices) {
  if (!writer_) return;
  writer_->batch(loaders_[dataset], epoch, batchSeq_[dataset]++,
                 static_cast<std::int64_t>(indices.size()), /*grad=*/true,
                 indices_ ? &indices : nullptr);
}

void TrainingTrace::endEpoch(std::int64_t epoch, const std::vector<std::int64_t>& consumed,
                             const std::vector<std::int64_t>& shardSizes) {
  if (!writer_) return;
  for (std::size_t d = 0; d < loaders_.size(); ++d) {
    if (consumed[d] >= shardSizes[d]) writer_->endPass(loaders_[d], epoch, batchSeq_[d]);
  }
}

void TrainingTrace::finish(torch::nn::Module& model) {
  if (!writer_) return;
  writer_->params(ddp_, stateHash(model));
  writer_->end(0);
}

// The bytes of every parameter, hashed: equal on every rank of a healthy run (one build of one
// program, so std::hash is the same function everywhere). Buffers are left out, as in the Python
// recorder: BatchNorm's running statistics differ between forwards on healthy ranks
// (docs/trace-format.md, `params`).
std::string TrainingTrace::stateHash(torch::nn::Module& model) const {
  torch::NoGradGuard noGrad;
  std::string bytes;
  auto add = [&](const torch::Tensor& t) {
    const auto c = t.detach().to(torch::kCPU).contiguous();
    bytes.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  };
  for (const auto& p : model.parameters()) add(p);
  return fmt::format("{:016x}", std::hash<std::string_view>{}(bytes));
}

}  // namespace ddph::train
