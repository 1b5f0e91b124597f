// The direct Gloo engine: libgloo's collectives on the calling thread, over only the pairs they
// use (NOTE [Gloo engines] in gloo_communicator.h). No c10d here: the rendezvous goes through
// RendezvousStore's public API, and Gloo's errors map to ours as c10d's do (collective_errors.h).
#include "gloo_direct_communicator.h"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>
#include <thread>

#include "ddph/comm/collective_errors.h"
#include "ddph/common/error.h"
#include "sigpipe_block.h"

namespace ddph {

namespace {

using Clock = std::chrono::steady_clock;
using detail::rethrowTyped;

// Slot prefixes of the star collectives; Gloo's own prefixes are 0x01..0x08 (gloo/types.h).
constexpr std::uint8_t kStarGatherSlot = 0x40;
constexpr std::uint8_t kStarBroadcastSlot = 0x41;
constexpr std::uint8_t kRelaySlot = 0x42;

// NOTE [Star for small payloads]: a ring needs 2(W-1) rounds in which every rank runs; a star
// needs every rank to run twice and rank 0 W times. On 2 cores shared by W rank processes the
// number of wake-ups decides, so payloads up to this many bytes (gathered at rank 0) go through
// the star at every W; larger ones (DDP's gradient buckets) use Gloo's ring up to
// starCollectivesAbove ranks, which moves 2(W-1)/W of the data per rank instead of W times it at
// rank 0.
constexpr std::size_t kStarMaxBytes = 64 * 1024;

// NOTE [Exchange allreduce]: up to this world size every pair is connected, and an allreduce of a
// large payload is one exchange: every rank sends its buffer to every other rank and reduces the
// W buffers itself, in rank order (so every rank gets the same bits). One round instead of the
// ring's 2(W-1) rounds of at least two segments each: a rank blocks once per allreduce, not
// 4(W-1) times, which is what a step costs when W rank processes share 2 cores.
constexpr int kFullMeshUpTo = 8;
constexpr int kExchangeUpTo = 4;
constexpr std::uint8_t kExchangeSlot = 0x43;

// NOTE [Sync pairs]: the exchange allreduce (NOTE [Exchange allreduce]) is what a DDP step at
// W = 2..4 spends its communication time in. On Gloo's asynchronous pairs every message goes:
// receiver posts a ready-to-receive notice, the sender's device loop thread reads it and writes
// the bytes, the receiver's loop thread reads them and wakes the caller. While the ranks compute
// (every core busy), each of those hand-offs waits for the scheduler to let a woken loop thread
// preempt a running rank: 0.4 ms per 400 KB allreduce with idle ranks became 1.3-1.7 ms with
// ranks busy 0.7 ms between calls (benchmarks/gloo_allreduce_benchmark.cpp, W = 2, 2 cores).
// So the exchange has its own pairs, switched to Gloo's synchronous mode (Pair::setSync): the
// calling thread writes and reads the socket itself, with bound buffers (createSendBuffer /
// createRecvBuffer; unbound buffers need the loop thread), no notices, no loop thread. Bytes that
// arrive early wait in the kernel until the receiver reads them, so a recv buffer only has to be
// registered before its owner reads, which is always the case (it reads right after).
// Blocking writes: two ranks writing more than the kernel buffers hold to each other would both
// block. So the exchange runs in rounds of disjoint pairs (round k pairs rank r with r XOR k) and
// in each pair the lower rank writes first and reads second, the higher one the other way round:
// no cycle of writers waiting for each other, whatever the socket buffer sizes.
// Deadlines: the pairs' sockets carry SO_RCVTIMEO / SO_SNDTIMEO of the connect timeout (Gloo sets
// them; a busy-polling read checks the same bound itself), so no read or write waits longer than
// that without progress. A peer that died has its sockets closed by the kernel: a read sees EOF, a
// write (even one blocked on full buffers) fails with ECONNRESET, both a ProtocolError at once
// (comm_test's ExchangeWaits). A write that starts after the peer left fails with EPIPE and raises
// SIGPIPE in the writing thread: the exchange blocks it (ScopedSigpipeBlock), so it never kills the
// process (it did, under load, before: the peer's close came before the first write).
// Only while the communicator's timeout is still the one the sockets carry does the exchange use
// these pairs; after setTimeout to another value it goes back to the asynchronous pairs, whose
// waits take the new timeout.
// Busy polling (GlooWait::kBusyPoll) saves the wake-up of a reader sleeping in recv(2), but spins
// a core while the peer still computes, so it is never used where ranks outnumber the hardware
// threads (std::thread::hardware_concurrency(); kBusyPoll then falls back to kSync): with W = 4
// ranks on 2 cores a spinning rank takes the core its peer needs to produce what it waits for
// (13.5 ms per allreduce against 2.5 ms sleeping, before that fallback existed). At W = 2 on 2
// quiet cores it gains little and not reliably (DDP step of benchmarks/ddp_step_benchmark.cpp,
// 4 alternating runs: 1.18-1.96 ms, median 1.48, against 1.58-1.76 ms, median 1.64), and with one
// other busy process on the machine it loses badly (2.65-3.26 ms sleeping, 4.75-5.60 ms
// spinning): the spinner holds a core the peer or the other process needs. Machines that run
// other work beside the ranks are the usual case here, so GlooWait::kAuto is kSync.
constexpr int kSyncSlotBase = 0x100;  // bound buffers: slot kSyncSlotBase + sender's rank

std::string pairKey(const std::string& prefix, int from, int to) {
  return fmt::format("{}/gloo-direct/{}/{}", prefix, from, to);
}

struct WaitMode {
  bool syncPairs = false;
  bool busyPoll = false;
};

// GlooOptions::wait resolved for this world (NOTE [Sync pairs]).
WaitMode resolveWait(GlooWait wait, int size) {
  switch (wait) {
    case GlooWait::kLoopThread: return {false, false};
    case GlooWait::kSync: return {true, false};
    case GlooWait::kAuto: return {true, false};
    case GlooWait::kBusyPoll: {
      const unsigned threads = std::thread::hardware_concurrency();  // 0: unknown
      return {true, threads > 0 && static_cast<unsigned>(size) <= threads};
    }
  }
  return {};
}

/// NOTE [Sparse connect]: the pairs a rank connects: rank 0 with every rank (the star collectives
/// and the barrier) and each rank with its ring neighbours (gloo::allreduce and gloo::allgather's
/// ring). Sorted: every rank connects its pairs in increasing peer order, so pair (a, b), a < b,
/// waits only for pairs that come before it in (min, max) order and the connect cannot deadlock
/// (the listening side of a pair is decided by Gloo from the two addresses, either side may wait).
std::vector<int> connectedPeers(int rank, int size) {
  std::set<int> peers;
  if (size <= kFullMeshUpTo) {
    for (int r = 0; r < size; ++r) peers.insert(r);
  } else if (rank == 0) {
    for (int r = 1; r < size; ++r) peers.insert(r);
  } else {
    peers.insert(0);
    peers.insert((rank + 1) % size);
    peers.insert((rank + size - 1) % size);
  }
  peers.erase(rank);
  return {peers.begin(), peers.end()};
}

/// A gloo::Context whose transport holds only the pairs of connectedPeers(); getPair() of any
/// other rank is null, so only collectives that stay on those pairs may run on it.
class SparseContext final : public gloo::Context {
 public:
  SparseContext(int rank, int size) : gloo::Context(rank, size) {}

  /// Connects the pairs of connectedPeers(); with `wait.syncPairs` and at most kExchangeUpTo
  /// ranks also a second full mesh of synchronous pairs for the exchange (NOTE [Sync pairs]).
  void connect(RendezvousStore& store, const std::string& prefix,
               std::shared_ptr<gloo::transport::Device> device, std::chrono::milliseconds timeout,
               WaitMode wait) {
    setTimeout(timeout);
    // Held by the base before any pair exists: its pairs hold a raw pointer to it, and the base
    // destroys its transport context before its device.
    device_ = std::move(device);
    const auto deadline = Clock::now() + timeout;
    transportContext_ =
        connectPairs(store, prefix, *device_, connectedPeers(rank, size), timeout, deadline);
    if (wait.syncPairs && size <= kExchangeUpTo) {
      std::vector<int> everyPeer;
      for (int r = 0; r < size; ++r) {
        if (r != rank) everyPeer.push_back(r);
      }
      syncPairs_ = connectPairs(store, prefix + "/sync", *device_, everyPeer, timeout, deadline);
      for (int peer : everyPeer) syncPairs_->getPair(peer)->setSync(true, wait.busyPoll);
      syncTimeout_ = timeout;
    }
  }

  /// Whether connect() made the synchronous pairs (NOTE [Sync pairs]).
  bool hasSyncPairs() const { return syncPairs_ != nullptr; }
  /// The synchronous pair to `peer`; only when hasSyncPairs().
  gloo::transport::Pair* syncPair(int peer) const { return syncPairs_->getPair(peer).get(); }
  /// The timeout the synchronous pairs' sockets carry.
  std::chrono::milliseconds syncTimeout() const { return syncTimeout_; }

 private:
  std::shared_ptr<gloo::transport::Context> connectPairs(RendezvousStore& store,
                                                         const std::string& prefix,
                                                         gloo::transport::Device& device,
                                                         const std::vector<int>& peers,
                                                         std::chrono::milliseconds timeout,
                                                         Clock::time_point deadline) {
    std::shared_ptr<gloo::transport::Context> transport = device.createContext(rank, size);
    transport->setTimeout(timeout);
    // One small key per pair and direction: a rank reads only its peers' addresses for it
    // (c10d's full mesh reads every rank's whole address list).
    for (int peer : peers) {
      const std::vector<char> address = transport->createPair(peer)->address().bytes();
      store.set(pairKey(prefix, rank, peer),
                std::vector<std::uint8_t>(address.begin(), address.end()));
    }
    for (int peer : peers) {
      const auto left = std::max(std::chrono::milliseconds(1),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - Clock::now()));
      const auto bytes = store.get(pairKey(prefix, peer, rank), left, "init");
      transport->getPair(peer)->connect(std::vector<char>(bytes.begin(), bytes.end()));
    }
    return transport;
  }

  // Declared after the base's device: destroyed (pairs closed) before it.
  std::shared_ptr<gloo::transport::Context> syncPairs_;
  std::chrono::milliseconds syncTimeout_{0};
};

template <typename T>
void (*reduceFunction(ReduceOp op))(void*, const void*, const void*, std::size_t) {
  switch (op) {
    case ReduceOp::kSum: return &gloo::sum<T>;
    case ReduceOp::kMax: return &gloo::max<T>;
    case ReduceOp::kMin: return &gloo::min<T>;
  }
  return &gloo::sum<T>;
}

/// Role: a Communicator over a SparseContext. Every collective runs to completion on the calling
/// thread (Gloo's device thread only moves bytes), so allreduceAsync completes before it returns
/// (the base's allreduceBufferAsync).
/// Concurrency: one thread per communicator (communicator.h); Gloo's tags follow the order of calls,
/// which is the same on every rank.
class GlooDirectCommunicator final : public Communicator {
 public:
  GlooDirectCommunicator(std::shared_ptr<SparseContext> context,
                         std::shared_ptr<RendezvousStore> store, const GlooOptions& options)
      : context_(std::move(context)),
        store_(std::move(store)),
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
      starBroadcastBytes(data.data, data.bytes(), root, nextTag(), Clock::now() + timeout_);
    });
  }

  void barrier(std::string_view step) override {
    if (size() == 1) return;
    guard("barrier", step, [&] {
      char token = 0;
      const auto deadline = Clock::now() + timeout_;
      const std::uint32_t tag = nextTag();
      starGatherBytes(&token, 1, nullptr, tag, deadline);
      starBroadcastBytes(&token, 1, 0, tag, deadline);
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
      starGatherBytes(mine.data(), bytes, flat.data(), tag, deadline);
      starBroadcastBytes(flat.data(), bytes * static_cast<std::size_t>(size()), 0, tag, deadline);
    });
    return flat;
  }

  std::string backendName() const override { return "gloo"; }

 private:
  std::uint32_t nextTag() { return tag_++; }

  bool useStar(std::size_t gatheredBytes) const {
    return size() > starAbove_ || gatheredBytes <= kStarMaxBytes;
  }

  std::chrono::milliseconds left(Clock::time_point deadline) const {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          Clock::now()));
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
          syncExchangeAllreduce(data, n, op);
        } else {
          exchangeAllreduce(data, n, op, tag);
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
      starGatherBytes(data, bytes, all.data(), tag, deadline);
      if (rank() == 0) {
        const auto reduce = reduceFunction<T>(op);
        for (int r = 1; r < size(); ++r) reduce(data, data, all.data() + r * n, n);
      }
      starBroadcastBytes(data, bytes, 0, tag, deadline);
    });
  }

  bool useExchange() const { return size() <= kExchangeUpTo; }

  // NOTE [Exchange allreduce].
  template <typename T>
  void exchangeAllreduce(T* data, std::size_t n, ReduceOp op, std::uint32_t tag) {
    const auto deadline = Clock::now() + timeout_;
    const std::size_t bytes = n * sizeof(T);
    const auto slot = gloo::Slot::build(kExchangeSlot, tag);
    const auto w = static_cast<std::size_t>(size());
    scratch_.resize(std::max(scratch_.size(), bytes * w));
    auto all = context_->createUnboundBuffer(scratch_.data(), bytes * w);
    auto mine = context_->createUnboundBuffer(data, bytes);
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) all->recv(r, slot, static_cast<std::size_t>(r) * bytes, bytes);
    }
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) mine->send(r, slot, 0, bytes);
    }
    for (int i = 1; i < size(); ++i) checkDone(all->waitRecv(left(deadline)));
    for (int i = 1; i < size(); ++i) checkDone(mine->waitSend(left(deadline)));
    reduceInRankOrder(data, n, op);
  }

  // NOTE [Sync pairs]: the exchange over the synchronous pairs, in rounds of disjoint pairs.
  template <typename T>
  void syncExchangeAllreduce(T* data, std::size_t n, ReduceOp op) {
    const ScopedSigpipeBlock noSigpipe;  // a peer that left: EPIPE, not a dead process
    const std::size_t bytes = n * sizeof(T);
    const auto w = static_cast<std::size_t>(size());
    scratch_.resize(std::max(scratch_.size(), bytes * w));
    int rounds = 1;
    while (rounds < size()) rounds *= 2;
    for (int k = 1; k < rounds; ++k) {
      const int peer = rank() ^ k;
      if (peer >= size()) continue;
      gloo::transport::Pair* pair = context_->syncPair(peer);
      // Slot = sender's rank: the send buffer's slot is never registered here (a buffer's
      // destructor unregisters its slot, whichever buffer holds it).
      auto in = pair->createRecvBuffer(kSyncSlotBase + peer,
                                       scratch_.data() + static_cast<std::size_t>(peer) * bytes,
                                       bytes);
      auto out = pair->createSendBuffer(kSyncSlotBase + rank(), data, bytes);
      if (rank() < peer) {
        out->send(0, bytes);
        out->waitSend();
        in->waitRecv();
      } else {
        in->waitRecv();
        out->send(0, bytes);
        out->waitSend();
      }
    }
    reduceInRankOrder(data, n, op);
  }

  // scratch_ holds every other rank's n elements at rank * n; data becomes their reduction with
  // this rank's, in rank order: ((x0 op x1) op x2) op ..., the partial result always the first
  // operand, so every rank computes the same bits (NaNs in max and min included). No copies: the
  // partial result up to this rank accumulates in rank 0's slot of scratch_ (received, free to
  // overwrite), the step with this rank's own x writes into data, the rest follows in data.
  template <typename T>
  void reduceInRankOrder(T* data, std::size_t n, ReduceOp op) {
    const auto reduce = reduceFunction<T>(op);
    T* in = reinterpret_cast<T*>(scratch_.data());
    const auto me = static_cast<std::size_t>(rank());
    if (me > 0) {
      for (std::size_t r = 1; r < me; ++r) reduce(in, in, in + r * n, n);
      reduce(data, in, data, n);
    }
    for (std::size_t r = me + 1; r < static_cast<std::size_t>(size()); ++r) {
      reduce(data, data, in + r * n, n);
    }
  }

  // Rank 0 receives every rank's `bytes` at `mine` into `all` (rank r at r * bytes; rank 0's own
  // copied); the others only send. `all` is used on rank 0 only (may be null on the others).
  void starGatherBytes(const void* mine, std::size_t bytes, void* all, std::uint32_t tag,
                       Clock::time_point deadline) {
    const auto slot = gloo::Slot::build(kStarGatherSlot, tag);
    if (rank() == 0) {
      char* out = static_cast<char*>(all);
      std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
      char token = 0;
      if (out == nullptr) {  // a barrier: every rank's byte lands on the same one
        buffer = context_->createUnboundBuffer(&token, 1);
        for (int r = 1; r < size(); ++r) buffer->recv(r, slot, 0, bytes);
      } else {
        std::memcpy(out, mine, bytes);
        buffer = context_->createUnboundBuffer(out, bytes * static_cast<std::size_t>(size()));
        for (int r = 1; r < size(); ++r) buffer->recv(r, slot, r * bytes, bytes);
      }
      for (int r = 1; r < size(); ++r) checkDone(buffer->waitRecv(left(deadline)));
    } else {
      auto buffer = context_->createUnboundBuffer(const_cast<void*>(mine), bytes);
      buffer->send(0, slot, 0, bytes);
      checkDone(buffer->waitSend(left(deadline)));
    }
  }

  // Every rank ends with `root`'s `bytes` at `data`: root sends to rank 0 when it is not rank 0
  // itself, rank 0 sends to every other rank (only rank 0 has a pair with every rank).
  void starBroadcastBytes(void* data, std::size_t bytes, int root, std::uint32_t tag,
                          Clock::time_point deadline) {
    auto buffer = context_->createUnboundBuffer(data, bytes);
    if (root != 0) {
      const auto relay = gloo::Slot::build(kRelaySlot, tag);
      if (rank() == root) {
        buffer->send(0, relay, 0, bytes);
        checkDone(buffer->waitSend(left(deadline)));
      } else if (rank() == 0) {
        buffer->recv(root, relay, 0, bytes);
        checkDone(buffer->waitRecv(left(deadline)));
      }
    }
    const auto slot = gloo::Slot::build(kStarBroadcastSlot, tag);
    if (rank() == 0) {
      int sends = 0;
      for (int r = 1; r < size(); ++r) {
        if (r == root) continue;
        buffer->send(r, slot, 0, bytes);
        ++sends;
      }
      for (int i = 0; i < sends; ++i) checkDone(buffer->waitSend(left(deadline)));
    } else if (rank() != root) {
      buffer->recv(0, slot, 0, bytes);
      checkDone(buffer->waitRecv(left(deadline)));
    }
  }

  static void checkDone(bool completed) {
    if (!completed) throw std::runtime_error("the Gloo operation was aborted");
  }

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
  std::chrono::milliseconds timeout_;
  int starAbove_;
  std::uint32_t tag_ = 0;
  std::vector<char> scratch_;  // the exchange allreduce's receive buffer, kept between calls
  // DDPH_TRACE_COLLECTIVES=1: every collective's duration on stderr (rank 0 only).
  bool trace_ = std::getenv("DDPH_TRACE_COLLECTIVES") != nullptr && context_->rank == 0;
};

}  // namespace

std::unique_ptr<Communicator> connectGlooDirect(std::shared_ptr<RendezvousStore> store, int rank,
                                                int size, const GlooOptions& options,
                                                const std::string& groupName) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<SparseContext>(rank, size);
    if (size > 1) {
      context->connect(*store, groupName, std::move(device), options.timeout,
                       resolveWait(options.wait, size));
    }
    return std::make_unique<GlooDirectCommunicator>(std::move(context), std::move(store), options);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    rethrowTyped(e, fmt::format("connecting rank {} of {} (Gloo on {})", rank, size,
                                options.hostname),
                 "init", options.timeout);
  }
}

}  // namespace ddph
