// c10d's ProcessGroupGloo behind the Communicator interface (GlooEngine::kProcessGroup).
//
// NOTE [c10d adapter]: every difference between LibTorch 1.13 (Debian 12) and 2.x we depend on is
// here and in c10d_store.cpp: the ProcessGroupGloo constructor and Options, c10d::ReduceOp,
// TCPStoreOptions, and the exceptions (c10::Error for timeouts and peer failures; 2.x adds
// DistBackendError, also a c10::Error). Nothing outside core/libtorch includes a c10d header
// but the NCCL communicator.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>

#include "ddph/comm/collective_errors.h"
#include "ddph/common/error.h"
#include "ddph/libtorch/c10d_glue.h"
#include "c10d_store_adapter.h"
#include "torch_parts.h"

namespace ddph::libtorch {

using common::Error;

namespace {

using comm::detail::rethrowTyped;

class GlooCommunicator final : public comm::Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg,
                   std::shared_ptr<comm::RendezvousStore> store, std::chrono::milliseconds timeout,
                   bool star)
      : pg_(std::move(pg)), store_(std::move(store)), timeout_(timeout), star_(star) {}

  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  void allreduceBuffer(comm::Buffer data, comm::ReduceOp op, std::string_view step) override {
    if (star_) {
      withElements(data, [&](auto* elements) { starAllreduce(elements, data.count, op, step); });
      return;
    }
    std::vector<at::Tensor> tensors{wrap(data)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = toC10d(op);
    opts.timeout = timeout_;
    run("allreduce", step, [&] { return pg_->allreduce(tensors, opts); });
  }

  std::unique_ptr<comm::PendingCollective> allreduceBufferAsync(comm::Buffer data,
                                                                comm::ReduceOp op,
                                                                std::string_view step) override {
    std::vector<at::Tensor> tensors{wrap(data)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = toC10d(op);
    opts.timeout = timeout_;
    try {
      return std::make_unique<PendingWork>(pg_->allreduce(tensors, opts), std::string(step),
                                           timeout_, &rethrowTyped);
    } catch (const std::exception& e) {
      rethrowTyped(e, "allreduce", step, timeout_);
    }
  }

  void broadcastBuffer(comm::Buffer data, int root, std::string_view step) override {
    std::vector<at::Tensor> tensors{wrap(data)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = timeout_;
    run("broadcast", step, [&] { return pg_->broadcast(tensors, opts); });
  }

  void barrier(std::string_view step) override {
    c10d::BarrierOptions opts;
    opts.timeout = timeout_;
    run("barrier", step, [&] { return pg_->barrier(opts); });
  }

  // Every rank's `mine` (all of the same length), concatenated in rank order.
  std::vector<std::int64_t> gatherBlocks(std::vector<std::int64_t> mine,
                                         std::string_view step) override {
    const auto n = static_cast<std::int64_t>(mine.size());
    if (star_) {
      std::vector<std::int64_t> flat = starGather(mine.data(), n, "allgather", step);
      flat.resize(static_cast<std::size_t>(n * size()));
      broadcastRaw(flat.data(), n * size(), "allgather", step);
      return flat;
    }
    std::vector<at::Tensor> input{at::from_blob(mine.data(), {n}, at::kLong)};
    std::vector<std::int64_t> flat(static_cast<std::size_t>(n * size()));
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < size(); ++r) {
      output[0].push_back(at::from_blob(flat.data() + r * n, {n}, at::kLong));
    }
    c10d::AllgatherOptions opts;
    opts.timeout = timeout_;
    run("allgather", step, [&] { return pg_->allgather(output, input, opts); });
    return flat;
  }

  std::string backendName() const override { return "gloo"; }

 private:
  template <typename T>
  static at::ScalarType scalarTypeOf() {
    return scalarType(comm::elementTypeOf<T>());
  }

  static at::Tensor wrap(const comm::Buffer& data) {
    return at::from_blob(data.data, {static_cast<std::int64_t>(data.count)},
                         scalarType(data.type));
  }

  // NOTE [Collectives at scale]: gather to rank 0, reduce there, broadcast the result.
  template <typename T>
  void starAllreduce(T* data, std::size_t count, comm::ReduceOp op, std::string_view step) {
    const auto n = static_cast<std::int64_t>(count);
    std::vector<T> all = starGather(data, n, "allreduce", step);
    if (rank() == 0) {
      for (int r = 1; r < size(); ++r) {
        for (std::int64_t k = 0; k < n; ++k) {
          T& acc = all[static_cast<std::size_t>(k)];
          const T v = all[static_cast<std::size_t>(r * n + k)];
          acc = op == comm::ReduceOp::kSum   ? acc + v
                : op == comm::ReduceOp::kMax ? std::max(acc, v)
                                             : std::min(acc, v);
        }
      }
      std::copy(all.begin(), all.begin() + n, data);
    }
    broadcastRaw(data, n, "allreduce", step);
  }

  // Rank 0 gets every rank's `n` elements at `mine` in rank order; others get nothing.
  template <typename T>
  std::vector<T> starGather(T* mine, std::int64_t n, std::string_view operation,
                            std::string_view step) {
    std::vector<at::Tensor> input{at::from_blob(mine, {n}, scalarTypeOf<T>())};
    std::vector<T> flat;
    std::vector<std::vector<at::Tensor>> output;
    if (rank() == 0) {
      flat.resize(static_cast<std::size_t>(n * size()));
      output.emplace_back();
      for (int r = 0; r < size(); ++r) {
        output[0].push_back(at::from_blob(flat.data() + r * n, {n}, scalarTypeOf<T>()));
      }
    }
    c10d::GatherOptions opts;
    opts.rootRank = 0;
    opts.timeout = timeout_;
    run(operation, step, [&] { return pg_->gather(output, input, opts); });
    return flat;
  }

  template <typename T>
  void broadcastRaw(T* data, std::int64_t n, std::string_view operation, std::string_view step) {
    std::vector<at::Tensor> tensors{at::from_blob(data, {n}, scalarTypeOf<T>())};
    c10d::BroadcastOptions opts;
    opts.rootRank = 0;
    opts.timeout = timeout_;
    run(operation, step, [&] { return pg_->broadcast(tensors, opts); });
  }

  template <typename Launch>
  void run(std::string_view operation, std::string_view step, Launch&& launch) {
    try {
      const auto start = std::chrono::steady_clock::now();
      auto work = launch();
      work->wait(timeout_);
      if (trace_) {
        fmt::print(stderr, "[rank {}] {} at {}: {:.1f} ms\n", rank(), operation, step,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             start)
                       .count());
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      rethrowTyped(e, operation, step, timeout_);
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::shared_ptr<comm::RendezvousStore> store_;  // keeps the store alive as long as the group
  std::chrono::milliseconds timeout_;
  bool star_ = false;
  // DDPH_TRACE_COLLECTIVES=1: every collective's duration on stderr (rank 0 only).
  bool trace_ = std::getenv("DDPH_TRACE_COLLECTIVES") != nullptr && pg_->getRank() == 0;
};

}  // namespace

std::unique_ptr<comm::Communicator> connectProcessGroupGloo(
    std::shared_ptr<comm::RendezvousStore> store, int rank, int size,
    const comm::GlooOptions& options, const std::string& groupName) {
  auto opts = c10d::ProcessGroupGloo::Options::create(options.timeout);
  opts->devices.push_back(
      c10d::ProcessGroupGloo::createDeviceForHostname(options.hostname));
  opts->threads = std::max(1, options.threads);
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(groupName, asC10dStore(store));
  prefixed->setTimeout(options.timeout);
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size, opts);
  return std::make_unique<GlooCommunicator>(std::move(pg), std::move(store), options.timeout,
                                            size > options.starCollectivesAbove);
}

}  // namespace ddph::libtorch
