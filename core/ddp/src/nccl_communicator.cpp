// Compiled only with a CUDA-enabled LibTorch (see core/CMakeLists.txt). Like
// libtorch/process_group_gloo.cpp, the only file that touches its c10d backend (NOTE [c10d
// adapter]); the store it connects through is c10d's (RendezvousStore::c10dStore()).
#include "ddph/ddp/nccl_communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "ddph/common/error.h"
#include "ddph/libtorch/c10d_glue.h"

namespace ddph::ddp {

using common::Error;
using common::ProtocolError;
using common::TimeoutError;

namespace {

[[noreturn]] void rethrow(const std::exception& e, std::string_view op, std::string_view step,
                          std::chrono::milliseconds timeout) {
  const std::string what = e.what();
  if (what.find("imed out") != std::string::npos || what.find("imeout") != std::string::npos) {
    throw TimeoutError(fmt::format("{} at {} timed out after {} ms (nccl): {}", op, step,
                                   timeout.count(), what.substr(0, what.find('\n'))));
  }
  throw ProtocolError(fmt::format("{} at {} failed (nccl): {}", op, step,
                                  what.substr(0, what.find('\n'))));
}

class NcclCommunicator final : public comm::Communicator {
 public:
  NcclCommunicator(c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg,
                   std::shared_ptr<comm::RendezvousStore> store, int device,
                   std::chrono::milliseconds timeout)
      : pg_(std::move(pg)), store_(std::move(store)), device_(device), timeout_(timeout) {}

  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }
  void setTimeout(std::chrono::milliseconds t) override { timeout_ = t; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  std::string backendName() const override { return "nccl"; }

  void allreduceBuffer(comm::Buffer data, comm::ReduceOp op, std::string_view step) override {
    onDevice(data, [&](at::Tensor t) { start(std::move(t), op, step)->wait(); });
  }
  std::unique_ptr<comm::PendingCollective> allreduceBufferAsync(comm::Buffer data,
                                                                comm::ReduceOp op,
                                                                std::string_view step) override {
    if (data.memory == comm::Memory::kHost)
      return comm::Communicator::allreduceBufferAsync(data, op, step);
    return start(device(data), op, step);
  }
  void broadcastBuffer(comm::Buffer data, int root, std::string_view step) override {
    onDevice(data, [&](at::Tensor t) { broadcastNow(std::move(t), root, step); });
  }
  // Every rank's block through a broadcast from each rank in turn: simple, and only used off the
  // hot path (the padded allgather of the base).
  std::vector<std::int64_t> gatherBlocks(std::vector<std::int64_t> mine,
                                         std::string_view step) override {
    const std::size_t n = mine.size();
    std::vector<std::int64_t> flat(n * static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) {
      std::vector<std::int64_t> block = r == rank() ? mine : std::vector<std::int64_t>(n);
      if (n > 0) broadcast(block, r, step);
      std::copy(block.begin(), block.end(), flat.begin() + static_cast<long>(r * n));
    }
    return flat;
  }
  void barrier(std::string_view step) override {
    try {
      c10d::BarrierOptions opts;
      opts.timeout = timeout_;
      pg_->barrier(opts)->wait(timeout_);
    } catch (const std::exception& e) {
      rethrow(e, "barrier", step, timeout_);
    }
  }

 private:
  at::Tensor device(const comm::Buffer& data) const {
    return at::from_blob(data.data, {static_cast<std::int64_t>(data.count)},
                         at::TensorOptions().dtype(libtorch::scalarType(data.type)).device(at::kCUDA, device_));
  }

  // Device memory as it is; host memory staged through the device and copied back.
  template <typename Fn>
  void onDevice(const comm::Buffer& data, Fn&& fn) {
    if (data.memory == comm::Memory::kNative) return fn(device(data));
    at::Tensor cpu = at::from_blob(data.data, {static_cast<std::int64_t>(data.count)},
                                   libtorch::scalarType(data.type));
    at::Tensor gpu = cpu.to(at::Device(at::kCUDA, device_));
    fn(gpu);
    cpu.copy_(gpu);
  }

  std::unique_ptr<comm::PendingCollective> start(at::Tensor t, comm::ReduceOp op,
                                                 std::string_view step) {
    std::vector<at::Tensor> tensors{std::move(t)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = libtorch::toC10d(op);
    opts.timeout = timeout_;
    try {
      return std::make_unique<libtorch::PendingWork>(pg_->allreduce(tensors, opts), std::string(step),
                                                     timeout_, &rethrow);
    } catch (const std::exception& e) {
      rethrow(e, "allreduce", step, timeout_);
    }
  }
  void broadcastNow(at::Tensor t, int root, std::string_view step) {
    std::vector<at::Tensor> tensors{std::move(t)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = timeout_;
    try {
      pg_->broadcast(tensors, opts)->wait(timeout_);
    } catch (const std::exception& e) {
      rethrow(e, "broadcast", step, timeout_);
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg_;
  std::shared_ptr<comm::RendezvousStore> store_;
  int device_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<comm::Communicator> connectNccl(std::shared_ptr<comm::RendezvousStore> store,
                                                int rank, int size, int device,
                                                std::chrono::milliseconds timeout,
                                                const std::string& groupName) {
  DDPH_CHECK(size > 0 && rank >= 0 && rank < size, "rank {} is outside a world of {}", rank, size);
  try {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    const auto* native = static_cast<const c10::intrusive_ptr<c10d::Store>*>(store->c10dStore());
    DDPH_CHECK(native != nullptr,
               "NCCL needs a c10d store (comm::makeTcpStore or comm::makeInProcessStore)");
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(groupName + "/nccl", *native);
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, rank, size, opts);
    return std::make_unique<NcclCommunicator>(std::move(pg), std::move(store), device, timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    rethrow(e, fmt::format("connecting rank {} of {} (NCCL on cuda:{})", rank, size, device),
            "init", timeout);
  }
}

}  // namespace ddph::ddp
