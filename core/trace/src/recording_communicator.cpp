#include "ddph/trace/recording_communicator.h"

namespace ddph::trace {
namespace {

// Marks the collective done when DDP waits for it (or at once, for engines that finish in start).
class RecordedPending final : public comm::PendingCollective {
 public:
  RecordedPending(std::unique_ptr<comm::PendingCollective> inner, TraceWriter& trace,
                  std::int64_t seq)
      : inner_(std::move(inner)), trace_(trace), seq_(seq) {}
  void wait() override {
    if (inner_) inner_->wait();
    if (!done_) trace_.collectiveDone(seq_);
    done_ = true;
  }

 private:
  std::unique_ptr<comm::PendingCollective> inner_;
  TraceWriter& trace_;
  std::int64_t seq_;
  bool done_ = false;
};

}  // namespace

RecordingCommunicator::RecordingCommunicator(comm::Communicator& inner, TraceWriter& trace,
                                             std::int64_t ddpModule)
    : inner_(inner), trace_(trace), ddpModule_(ddpModule) {}

RecordingCommunicator::RecordingCommunicator(std::unique_ptr<comm::Communicator> inner,
                                             TraceWriter& trace, std::int64_t ddpModule)
    : owned_(std::move(inner)), inner_(*owned_), trace_(trace), ddpModule_(ddpModule) {}

template <class Call>
auto RecordingCommunicator::recorded(const char* op, std::string_view dtype, std::size_t numel,
                                     Call&& call) {
  TraceWriter::Collective c;
  c.op = op;
  c.dtype = dtype;
  c.numel = static_cast<std::int64_t>(numel);
  const std::int64_t seq = trace_.enterCollective(c);
  if constexpr (std::is_void_v<decltype(call())>) {
    call();
    trace_.collectiveDone(seq);
  } else {
    auto result = call();
    trace_.collectiveDone(seq);
    return result;
  }
}

void RecordingCommunicator::allreduceBuffer(comm::Buffer data, comm::ReduceOp op,
                                            std::string_view step) {
  recorded("all_reduce", comm::elementTypeName(data.type), data.count,
           [&] { inner_.allreduceBuffer(data, op, step); });
}

std::vector<std::vector<std::int64_t>> RecordingCommunicator::allgatherv(
    const std::vector<std::int64_t>& mine, const std::vector<std::int64_t>* lengths,
    std::string_view step) {
  return recorded("all_gather_object", "int64", mine.size(),
                  [&] { return inner_.allgatherv(mine, lengths, step); });
}

void RecordingCommunicator::broadcastBuffer(comm::Buffer data, int root, std::string_view step) {
  recorded("broadcast", comm::elementTypeName(data.type), data.count,
           [&] { inner_.broadcastBuffer(data, root, step); });
}

void RecordingCommunicator::barrier(std::string_view step) {
  recorded("barrier", "", 0, [&] { inner_.barrier(step); });
}

TraceWriter::Collective RecordingCommunicator::bucket(std::string_view dtype, std::size_t numel,
                                                      std::string_view step) {
  if (step != lastStep_) {  // a new backward pass: DDP labels all of one pass's buckets alike
    lastStep_ = std::string(step);
    ++backward_;
    bucket_ = 0;
  }
  TraceWriter::Collective c;
  c.op = "all_reduce";
  c.dtype = dtype;
  c.numel = static_cast<std::int64_t>(numel);
  c.ddp = true;
  c.module = ddpModule_;
  c.bucket = bucket_++;
  c.backward = backward_;
  return c;
}

std::unique_ptr<comm::PendingCollective> RecordingCommunicator::allreduceBufferAsync(
    comm::Buffer data, comm::ReduceOp op, std::string_view step) {
  const std::int64_t seq =
      trace_.enterCollective(bucket(comm::elementTypeName(data.type), data.count, step));
  return std::make_unique<RecordedPending>(inner_.allreduceBufferAsync(data, op, step), trace_,
                                           seq);
}

}  // namespace ddph::trace
