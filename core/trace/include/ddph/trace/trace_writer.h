#pragma once
// The C++ recorder: writes one rank's audit trace (docs/trace-format.md) from a LibTorch program,
// the same lines the Python recorder writes, so that `ddp-sim audit` judges both alike.
//
//   auto trace = trace::TraceWriter::fromEnvironment(rank, worldSize, argv);  // DDPH_AUDIT_DIR
//   if (trace) { auto s = trace->addSampler({...}); ... }
//
// Every line is written and flushed when the event happens (a killed rank keeps what it did).
// Thread-safe: one mutex around each line (DDP may report a collective from a hook thread).
// Errors: the constructor throws ConfigError when the file cannot be created; a later write
// error disables the writer and is reported once on stderr, never thrown into the program.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ddph/sampler/sampler.h"

namespace ddph::trace {

/// A sampler as the trace declares it ("sampler" line).
struct SamplerInfo {
  std::string className;
  std::int64_t datasetLen = 0;
  /// "torch-distributed" (PyTorch's order, recomputable), "sequential" or "recorded".
  std::string order = "torch-distributed";
  std::optional<std::int64_t> numReplicas, rank, seed;
  std::optional<bool> shuffle, dropLast;
};

/// A loader as the trace declares it ("loader" line).
struct LoaderInfo {
  std::int64_t sampler = 0;
  std::string dataset;
  std::int64_t datasetLen = 0;
  std::int64_t batchSize = 1;
  bool dropLast = false;
  /// Batches are consecutive slices of the sampler's order (else each batch carries its indices).
  bool torchBatching = true;
  /// The order the dataset lists its samples in ("<what>:<hash>"; empty: not known).
  std::string datasetFingerprint;
};

/// The start of one pass over a loader ("epoch" line): the sampler's state then.
struct PassInfo {
  std::int64_t loader = 0;
  std::int64_t iter = 0;
  std::optional<std::int64_t> samplerEpoch, seed, numReplicas, rank, batches;
  std::optional<bool> shuffle, dropLast;
  std::int64_t datasetLen = 0;
  std::map<std::int64_t, std::string> params;  ///< DDP module id -> state hash
};

class TraceWriter {
 public:
  /// Creates `dir/rank-<rank>.jsonl` (the folder must exist) and writes the header.
  TraceWriter(const std::filesystem::path& dir, int rank, int worldSize, std::string runId,
              std::vector<std::string> argv, std::string producer, int attempt = 0,
              bool reportFailures = true);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// A writer into $DDPH_AUDIT_DIR (run id from $DDPH_AUDIT_RUN_ID or $TORCHELASTIC_RUN_ID, argv
  /// from /proc/self/cmdline; after torchrun restarted the ranks, into its attemptFolder), or
  /// nullptr when DDPH_AUDIT_DIR is not set: auditing is opt-in and costs nothing otherwise.
  /// `orDir`, when not empty, is where to write when DDPH_AUDIT_DIR is not set (created if
  /// missing; a program's own option, as ddp-train's --trace-samples).
  static std::unique_ptr<TraceWriter> fromEnvironment(int rank, int worldSize,
                                                      std::string producer,
                                                      const std::filesystem::path& orDir = {});

  std::int64_t addSampler(const SamplerInfo& info);
  void setEpoch(std::int64_t sampler, std::int64_t epoch);
  std::int64_t addLoader(const LoaderInfo& info);
  void startPass(const PassInfo& info);
  /// `indices` is required when the loader's batching is not torch's.
  void batch(std::int64_t loader, std::int64_t iter, std::int64_t seq, std::int64_t size, bool grad,
             const std::vector<sampler::Index>* indices = nullptr);
  void endPass(std::int64_t loader, std::int64_t iter, std::int64_t batches);
  std::int64_t addDdp(const std::string& module, std::int64_t parameters);
  void forward(std::int64_t ddp, std::int64_t n, bool training, bool grad);

  /// A collective entered on the default group; returns its sequence number for collectiveDone.
  struct Collective {
    std::string op, dtype;
    std::int64_t numel = 0;
    bool ddp = false;  ///< DDP's gradient allreduce (then module, bucket, backward)
    std::int64_t module = 0, bucket = -1, backward = -1;
  };
  std::int64_t enterCollective(const Collective& c);
  void collectiveDone(std::int64_t seq);

  void params(std::int64_t ddp, const std::string& hash);
  void error(const std::string& type, const std::string& message);
  void end(int code);

  /// What made a write fail ("cannot write '…/rank-0.jsonl' (File too large)"; the trace stops
  /// there), or empty. Made with `reportFailures` false, the writer says nothing on stderr then:
  /// its caller reports it (`ddp-sim run`'s supervisor: one line for the whole run).
  std::string failure();

 private:
  void line(const std::string& json);
  double now() const;

  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::filesystem::path path_;
  double start_ = 0;
  std::int64_t samplers_ = 0, loaders_ = 0, ddps_ = 0, collectives_ = 0;
  bool failed_ = false;
  std::string failure_;
  bool reportFailures_ = true;
};

}  // namespace ddph::trace
