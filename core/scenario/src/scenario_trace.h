#pragma once
// The scenario rank program's audit trace (docs/trace-format.md): what `ddp-sim rank-run` does, in
// the lines a Python program's recorder writes, so that `ddp-sim launch --audit -- ddp-sim
// rank-run NAME` (DDPH_AUDIT_DIR) and every `ddp-sim run` (its ranks write into the run's trace
// folder) are judged by the same verifier as a real script. Without a folder every method is a
// no-op.
//
// Per dataset: its sampler ("pytorch" is torch's order, recomputed by the verifier; the others
// are recorded batch by batch), a loader, and per epoch a set_epoch (unless the scenario forgets
// it) and a pass whose batches carry their positions in the dataset's listing; a per-rank listing
// order (faults.per_rank_order) shows as different dataset fingerprints. The step allreduce goes
// through a RecordingCommunicator.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddph/trace/recording_communicator.h"
#include "ddph/trace/trace_writer.h"
#include "ddph/scenario/rank_program.h"
#include "ddph/scenario/scenario.h"

namespace ddph::scenario {

class ScenarioTrace {
 public:
  /// Into `target.dir`, or $DDPH_AUDIT_DIR when that is empty (rank_program.h).
  ScenarioTrace(int rank, int worldSize, const RankTraceTarget& target);

  bool enabled() const { return writer_ != nullptr; }
  /// Why a write failed (the trace stops short of what the rank did), or empty.
  std::string failure();

  /// The communicator to use: `comm`, wrapped to record its collectives when on.
  comm::Communicator& record(comm::Communicator& comm);

  /// One sampler and loader per dataset; `listings[d]` is the rank's listing order (empty: 0..N-1).
  void declare(const std::vector<DatasetSpec>& datasets,
               const std::vector<std::vector<sampler::Index>>& listings, const Scenario& scenario);
  /// A pass per dataset; `samplerEpoch` empty when set_epoch is never called.
  void startEpoch(std::int64_t epoch, std::optional<std::int64_t> samplerEpoch, std::int64_t seed,
                  const std::vector<std::int64_t>& batches);
  /// One batch of dataset `d`, as the listing's ids (mapped back to positions here).
  void batch(std::int64_t epoch, std::size_t d, const std::vector<sampler::Index>& ids);
  /// Ends the passes whose batches were all drawn.
  void endEpoch(std::int64_t epoch, const std::vector<std::int64_t>& batchesDrawn,
                const std::vector<std::int64_t>& batches);
  /// The rank failed with `message` (an `error` line; the trace then has no `end`).
  void error(const std::string& type, const std::string& message);
  void end();

 private:
  std::unique_ptr<trace::TraceWriter> writer_;
  std::unique_ptr<trace::RecordingCommunicator> recording_;
  int rank_ = 0, worldSize_ = 1;
  std::vector<DatasetSpec> datasets_;
  std::vector<std::vector<sampler::Index>> positionOf_;  ///< [d][id] -> position in the listing
  std::vector<std::int64_t> samplers_, loaders_, seq_;
  bool grad_ = true;  ///< false for an evaluation scenario (its batches are under no_grad)
};

}  // namespace ddph::scenario
