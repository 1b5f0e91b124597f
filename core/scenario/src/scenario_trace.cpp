#include "scenario_trace.h"

#include <fmt/format.h>

#include <fstream>
#include <functional>
#include <string_view>

#include "ddph/config.h"

namespace ddph::scenario {

using sampler::Index;

namespace {

std::unique_ptr<trace::TraceWriter> writerFor(int rank, int worldSize, const RankTraceTarget& target) {
  const std::string producer = std::string("ddp-sim rank-run ") + DDPH_VERSION;
  if (target.dir.empty()) return trace::TraceWriter::fromEnvironment(rank, worldSize, producer);
  std::vector<std::string> argv;
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  for (std::string arg; std::getline(cmdline, arg, '\0');) argv.push_back(arg);
  // `ddp-sim run`'s own folder: its supervisor says once for the run that the trace was lost.
  return std::make_unique<trace::TraceWriter>(target.dir, rank, worldSize, target.runId,
                                              std::move(argv), producer, /*attempt=*/0,
                                              /*reportFailures=*/false);
}

}  // namespace

ScenarioTrace::ScenarioTrace(int rank, int worldSize, const RankTraceTarget& target)
    : writer_(writerFor(rank, worldSize, target)), rank_(rank), worldSize_(worldSize) {}

std::string ScenarioTrace::failure() { return writer_ ? writer_->failure() : std::string(); }

comm::Communicator& ScenarioTrace::record(comm::Communicator& comm) {
  if (!writer_) return comm;
  recording_ = std::make_unique<trace::RecordingCommunicator>(comm, *writer_);
  return *recording_;
}

void ScenarioTrace::declare(const std::vector<DatasetSpec>& datasets,
                            const std::vector<std::vector<Index>>& listings, const Scenario& s) {
  if (!writer_) return;
  datasets_ = datasets;
  grad_ = s.phase != "eval";
  for (std::size_t d = 0; d < datasets.size(); ++d) {
    const DatasetSpec& spec = datasets[d];
    trace::SamplerInfo info;
    info.className = fmt::format("ddph:{}", spec.sampler);
    info.datasetLen = spec.size;
    info.order = spec.sampler == "pytorch" ? "torch-distributed" : "recorded";
    info.numReplicas = worldSize_;
    info.rank = rank_;
    info.seed = s.seed;
    info.shuffle = spec.shuffle;
    info.dropLast = spec.samplerDropLast;
    samplers_.push_back(writer_->addSampler(info));
    trace::LoaderInfo loader;
    loader.sampler = samplers_.back();
    loader.dataset = spec.name;
    loader.datasetLen = spec.size;
    loader.batchSize = s.batchSize;
    loader.dropLast = s.dropLast;
    loader.torchBatching = false;  // every batch carries its indices
    std::vector<Index> position;
    if (!listings[d].empty()) {
      position.resize(listings[d].size());
      for (std::size_t k = 0; k < listings[d].size(); ++k) {
        position[static_cast<std::size_t>(listings[d][k])] = static_cast<Index>(k);
      }
      const std::string_view bytes(reinterpret_cast<const char*>(listings[d].data()),
                                   listings[d].size() * sizeof(Index));
      loader.datasetFingerprint = fmt::format("listing:{:016x}", std::hash<std::string_view>{}(bytes));
    } else {
      loader.datasetFingerprint = "listing:identity";
    }
    positionOf_.push_back(std::move(position));
    loaders_.push_back(writer_->addLoader(loader));
  }
}

void ScenarioTrace::startEpoch(std::int64_t epoch, std::optional<std::int64_t> samplerEpoch,
                               std::int64_t seed, const std::vector<std::int64_t>& batches) {
  if (!writer_) return;
  seq_.assign(loaders_.size(), 0);
  for (std::size_t d = 0; d < loaders_.size(); ++d) {
    if (samplerEpoch) writer_->setEpoch(samplers_[d], *samplerEpoch);
    trace::PassInfo p;
    p.loader = loaders_[d];
    p.iter = epoch;
    p.samplerEpoch = samplerEpoch.value_or(0);
    p.seed = seed;
    p.numReplicas = worldSize_;
    p.rank = rank_;
    p.shuffle = datasets_[d].shuffle;
    p.dropLast = datasets_[d].samplerDropLast;
    p.datasetLen = datasets_[d].size;
    p.batches = batches[d];
    writer_->startPass(p);
  }
}

void ScenarioTrace::batch(std::int64_t epoch, std::size_t d, const std::vector<Index>& ids) {
  if (!writer_) return;
  std::vector<Index> positions = ids;
  if (!positionOf_[d].empty()) {
    for (auto& i : positions) i = positionOf_[d][static_cast<std::size_t>(i)];
  }
  writer_->batch(loaders_[d], epoch, seq_[d]++, static_cast<std::int64_t>(positions.size()),
                 grad_, &positions);
}

void ScenarioTrace::endEpoch(std::int64_t epoch, const std::vector<std::int64_t>& batchesDrawn,
                             const std::vector<std::int64_t>& batches) {
  if (!writer_) return;
  for (std::size_t d = 0; d < loaders_.size(); ++d) {
    if (batchesDrawn[d] >= batches[d]) writer_->endPass(loaders_[d], epoch, batchesDrawn[d]);
  }
}

void ScenarioTrace::error(const std::string& type, const std::string& message) {
  if (writer_) writer_->error(type, message);
}

void ScenarioTrace::end() {
  if (writer_) writer_->end(0);
}

}  // namespace ddph::scenario
