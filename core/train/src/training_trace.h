#pragma once
// ddp-train's audit trace (docs/trace-format.md): what ddp-train does, in the lines a Python
// program's recorder writes, so that `ddp-sim launch --audit -- ddp-train …` is judged like a
// PyTorch script. On when DDPH_AUDIT_DIR is set or --trace-samples names a folder (which then
// gets the trace, every batch with its indices); every method is cheap (a line per event), and a
// no-op when off.
//
// Per dataset: a DistributedSampler ("torch-distributed": the verifier recomputes its order) and a
// loader whose batches are consecutive slices of it (in every mix: zip, cycle, concat); per epoch a
// set_epoch and a pass per dataset, ended when the rank consumed its whole shard (zip leaves the
// longer dataset's pass unended: what the audit reports as samples never seen); DDP's gradient
// allreduces through a RecordingCommunicator; the model's state hash at every pass and at the end.

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "ddph/trace/trace_writer.h"
#include "ddph/comm/communicator.h"
#include "ddph/sampler/sampler.h"

namespace ddph::train {

class TrainingTrace {
 public:
  /// Off unless DDPH_AUDIT_DIR is set or `samplesDir` (--trace-samples) is not empty.
  TrainingTrace(int rank, int worldSize, const std::string& samplesDir);

  bool enabled() const { return writer_ != nullptr; }

  /// Wraps `comm` so that its collectives are recorded (returns it unchanged when off).
  std::unique_ptr<comm::Communicator> record(std::unique_ptr<comm::Communicator> comm);

  /// One sampler and loader per dataset (names, sizes), and the DDP module.
  void declare(const std::vector<std::string>& names, const std::vector<std::int64_t>& sizes,
               std::int64_t seed, bool shuffle, std::int64_t batchSize, torch::nn::Module& model);

  /// set_epoch and a pass per dataset; `batches[d]` is len(loader) of dataset d on this rank.
  void startEpoch(std::int64_t epoch, const std::vector<std::int64_t>& batches,
                  torch::nn::Module& model);
  void batch(std::int64_t epoch, std::size_t dataset, const std::vector<sampler::Index>& indices);
  /// Ends the passes whose shard was consumed whole (`consumed[d]` indices of `shardSizes[d]`).
  void endEpoch(std::int64_t epoch, const std::vector<std::int64_t>& consumed,
                const std::vector<std::int64_t>& shardSizes);
  /// The final state hash and the end line.
  void finish(torch::nn::Module& model);

 private:
  std::string stateHash(torch::nn::Module& model) const;

  std::unique_ptr<trace::TraceWriter> writer_;
  int rank_ = 0, worldSize_ = 1;
  std::int64_t seed_ = 0;
  bool shuffle_ = true;
  std::vector<std::int64_t> sizes_, samplers_, loaders_, batchSeq_;
  std::int64_t ddp_ = -1;
  bool indices_ = false;  ///< --trace-samples: every batch carries its indices
};

}  // namespace ddph::train
