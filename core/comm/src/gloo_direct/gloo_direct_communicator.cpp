// The direct Gloo engine's Communicator: libgloo's collectives on the calling thread, over only
// the pairs they use (NOTE [Gloo engines] in gloo_communicator.h). It picks, per collective, one
// algorithm of this folder: the star through rank 0 (star.h; above starCollectivesAbove over its
// own sockets, no Gloo device: star_sockets.h, NOTE [Star sockets]), the exchange allreduce
// (exchange_allreduce.h) or Gloo's own ring (gloo::allreduce, gloo::allgather), all over the
// sparse pairs of sparse_context.h. No c10d here: the rendezvous goes through RendezvousStore's
// public API, and Gloo's errors map to ours as c10d's do (collective_errors.h).
#include "gloo_direct_communicator.h"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/transport/tcp/device.h>

#include <cstdlib>

#include "ddph/comm/collective_errors.h"
#include "ddph/common/error.h"
#include "exchange_allreduce.h"
#include "reduce_function.h"
#include "sparse_context.h"
#include "star.h"
#include "star_sockets.h"

namespace ddph::comm {

using common::Error;

namespace {

using detail::rethrowTyped;
using gloo_direct::Clock;
using gloo_direct::ExchangeAllreduce;
using gloo_direct::kExchangeUpTo;
using gloo_direct::kStarMaxBytes;
using gloo_direct::reduceFunction;
using gloo_direct::resolveWait;
using gloo_direct::SparseContext;
using gloo_direct::starBroadcast;
using gloo_direct::starGather;
using gloo_direct::StarSockets;

/// Role: a Communicator over a SparseContext. Every collective runs to completion on the calling
/// thread (Gloo's device thread only moves bytes), so allreduceAsync completes before it returns
/// (the base's allreduceBufferAsync).
/// Concurrency: one thread per communicator (communicator.h); Gloo's tags follow the order of calls,
/// which is the same on every rank.
class GlooDirectCommunicator final : public Communicator {
 public:
  /// `stars`: the star's own sockets of a world above starCollectivesAbove (NOTE [Star sockets]),
  /// else null (the context's Gloo pairs carry every collective).
  GlooDirectCommunicator(std::shared_ptr<SparseContext> context,
                         std::shared_ptr<RendezvousStore> store, const GlooOptions& options,
                         std::unique_ptr<StarSockets> stars)
      : context_(std::move(context)),
        store_(std::move(store)),
        stars_(std::move(stars)),
        timeout_(options.timeout),
        starAbove_(options.starCollectivesAbove) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  void allreduceBuffer(Buffer data, ReduceOp op, std::string_view step) override {
    withElements(data, [&](auto* elements) { allreduceRaw(elements, data.count, op, step); });
  }

  void broadcastBuffer(Buffer data, int root, std::string_view step) override {
    DDPH_CHECK(root >= 0 && root < size(), "broadcast at {}: root {} is outside a world of {}",
               step, root, size());
    if (size() == 1 || data.count == 0) return;
    guard("broadcast", step, [&] {
      broadcastStar(data.data, data.bytes(), root, nextTag(), Clock::now() + timeout_);
    });
  }

  void barrier(std::string_view step) override {
    if (size() == 1) return;
    guard("barrier", step, [&] {
      char token = 0;
      const auto deadline = Clock::now() + timeout_;
      const std::uint32_t tag = nextTag();
      gatherStar(&token, 1, nullptr, tag, deadline);
      broadcastStar(&token, 1, 0, tag, deadline);
    });
  }

  // Every rank's `mine` (all of the same length), concatenated in rank order.
  std::vector<std::int64_t> gatherBlocks(std::vector<std::int64_t> mine,
                                         std::string_view step) override {
    const std::size_t n = mine.size();
    std::vector<std::int64_t> flat(n * static_cast<std::size_t>(size()));
    if (size() == 1) return mine;
    guard("allgather", step, [&] {
      const std::uint32_t tag = nextTag();
      const std::size_t bytes = n * sizeof(std::int64_t);
      if (!useStar(bytes * static_cast<std::size_t>(size()))) {
        gloo::AllgatherOptions opts(context_);
        opts.setInput(mine.data(), n);
        opts.setOutput(flat.data(), flat.size());
        opts.setTag(tag);
        opts.setTimeout(timeout_);
        gloo::allgather(opts);
        return;
      }
      const auto deadline = Clock::now() + timeout_;
      gatherStar(mine.data(), bytes, flat.data(), tag, deadline);
      broadcastStar(flat.data(), bytes * static_cast<std::size_t>(size()), 0, tag, deadline);
    });
    return flat;
  }

  std::string backendName() const override { return "gloo"; }

 private:
  std::uint32_t nextTag() { return tag_++; }

  bool useStar(std::size_t gatheredBytes) const {
    return size() > starAbove_ || gatheredBytes <= kStarMaxBytes;
  }

  template <typename T>
  void allreduceRaw(T* data, std::size_t n, ReduceOp op, std::string_view step) {
    if (size() == 1 || n == 0) return;
    guard("allreduce", step, [&] {
      const std::uint32_t tag = nextTag();
      const bool star = useStar(n * sizeof(T) * static_cast<std::size_t>(size()));
      if (!star && useExchange()) {
        // NOTE [Sync pairs]: only while the sockets' timeout is still the communicator's.
        if (context_->hasSyncPairs() && timeout_ == context_->syncTimeout()) {
          exchange_.runSync(data, n, op);
        } else {
          exchange_.run(data, n, op, tag, Clock::now() + timeout_);
        }
        return;
      }
      if (!star) {
        gloo::AllreduceOptions opts(context_);
        opts.setOutput(data, n);
        opts.setReduceFunction(reduceFunction<T>(op));
        opts.setTag(tag);
        opts.setTimeout(timeout_);
        gloo::allreduce(opts);
        return;
      }
      // NOTE [Collectives at scale]: gather to rank 0, reduce there in rank order, broadcast.
      const auto deadline = Clock::now() + timeout_;
      const std::size_t bytes = n * sizeof(T);
      std::vector<T> all(rank() == 0 ? n * static_cast<std::size_t>(size()) : 0);
      gatherStar(data, bytes, all.data(), tag, deadline);
      if (rank() == 0) {
        const auto reduce = reduceFunction<T>(op);
        for (int r = 1; r < size(); ++r) reduce(data, data, all.data() + r * n, n);
      }
      broadcastStar(data, bytes, 0, tag, deadline);
    });
  }

  void gatherStar(const void* mine, std::size_t bytes, void* all, std::uint32_t tag,
                  Clock::time_point deadline) {
    if (stars_) return stars_->gather(mine, bytes, all, tag, deadline);
    starGather(*context_, mine, bytes, all, tag, deadline);
  }

  void broadcastStar(void* data, std::size_t bytes, int root, std::uint32_t tag,
                     Clock::time_point deadline) {
    if (stars_) return stars_->broadcast(data, bytes, root, tag, deadline);
    starBroadcast(*context_, data, bytes, root, tag, deadline);
  }

  bool useExchange() const { return size() <= kExchangeUpTo; }

  template <typename Body>
  void guard(std::string_view operation, std::string_view step, Body&& body) {
    try {
      const auto start = Clock::now();
      body();
      if (trace_) {
        fmt::print(stderr, "[rank {}] {} at {}: {:.1f} ms\n", rank(), operation, step,
                   std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      rethrowTyped(e, operation, step, timeout_);
    }
  }

  std::shared_ptr<SparseContext> context_;
  std::shared_ptr<RendezvousStore> store_;  // keeps the store alive as long as the context
  std::unique_ptr<StarSockets> stars_;
  std::chrono::milliseconds timeout_;
  int starAbove_;
  std::uint32_t tag_ = 0;
  ExchangeAllreduce exchange_{*context_};
  // DDPH_TRACE_COLLECTIVES=1: every collective's duration on stderr (rank 0 only).
  bool trace_ = std::getenv("DDPH_TRACE_COLLECTIVES") != nullptr && context_->rank == 0;
};

}  // namespace

std::unique_ptr<Communicator> connectGlooDirect(std::shared_ptr<RendezvousStore> store, int rank,
                                                int size, const GlooOptions& options,
                                                const std::string& groupName) {
  auto context = std::make_shared<SparseContext>(rank, size);
  if (size > 1 && size > options.starCollectivesAbove) {
    // NOTE [Star sockets]: every collective is a star; no Gloo device (and no loop thread).
    auto stars = std::make_unique<StarSockets>(*store, groupName, rank, size, options.hostname,
                                               Clock::now() + options.timeout);
    return std::make_unique<GlooDirectCommunicator>(std::move(context), std::move(store), options,
                                                    std::move(stars));
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = options.hostname;
  std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
  if (size > 1) {
    context->connect(*store, groupName, std::move(device), options.timeout,
                     resolveWait(options.wait, size));
  }
  return std::make_unique<GlooDirectCommunicator>(std::move(context), std::move(store), options,
                                                  nullptr);
}

}  // namespace ddph::comm
