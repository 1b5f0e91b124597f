#pragma once
// A Communicator that records every collective into an audit trace, then runs it on the one it
// wraps: what a LibTorch program under `ddp-sim launch --audit` does to be audited like a Python
// one. Asynchronous allreduces are DDP's gradient buckets (DistributedDataParallel starts one per
// bucket, all under one step label per backward pass): they are recorded as `src: ddp` with their
// bucket index and backward count.

#include <memory>
#include <string>

#include "ddph/trace/trace_writer.h"
#include "ddph/comm/communicator.h"

namespace ddph::trace {

class RecordingCommunicator final : public comm::Communicator {
 public:
  /// Neither `inner` nor `trace` is owned; both must outlive this. `ddpModule` is the trace id of
  /// the DDP module whose buckets the asynchronous allreduces are.
  RecordingCommunicator(comm::Communicator& inner, TraceWriter& trace, std::int64_t ddpModule = 0);
  /// The same, owning `inner` (to stand in for it where a program holds a unique_ptr).
  RecordingCommunicator(std::unique_ptr<comm::Communicator> inner, TraceWriter& trace,
                        std::int64_t ddpModule = 0);

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void setTimeout(std::chrono::milliseconds timeout) override { inner_.setTimeout(timeout); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  std::string backendName() const override { return inner_.backendName(); }

  void allreduceBuffer(comm::Buffer data, comm::ReduceOp op, std::string_view step) override;
  std::unique_ptr<comm::PendingCollective> allreduceBufferAsync(comm::Buffer data,
                                                                comm::ReduceOp op,
                                                                std::string_view step) override;
  void broadcastBuffer(comm::Buffer data, int root, std::string_view step) override;
  void barrier(std::string_view step) override;
  /// One recorded collective per allgather (not its parts).
  std::vector<std::vector<std::int64_t>> allgatherv(const std::vector<std::int64_t>& mine,
                                                    const std::vector<std::int64_t>* lengths,
                                                    std::string_view step) override;
  /// Not recorded: reached only through the wrapped communicator's own allgatherv.
  std::vector<std::int64_t> gatherBlocks(std::vector<std::int64_t> block,
                                         std::string_view step) override {
    return inner_.gatherBlocks(std::move(block), step);
  }

 private:
  /// Records entry, runs `call`, records completion (not when it throws: the trace then shows
  /// the collective the rank failed in).
  template <class Call>
  auto recorded(const char* op, std::string_view dtype, std::size_t numel, Call&& call);
  TraceWriter::Collective bucket(std::string_view dtype, std::size_t numel, std::string_view step);

  std::unique_ptr<comm::Communicator> owned_;
  comm::Communicator& inner_;
  TraceWriter& trace_;
  std::int64_t ddpModule_;
  std::string lastStep_;
  std::int64_t backward_ = -1, bucket_ = 0;
};

}  // namespace ddph::trace
