#pragma once
// Private to the direct Gloo engine: the exchange allreduce of W <= 4 ranks (NOTE [Exchange
// allreduce]), over Gloo's asynchronous pairs or the synchronous ones (NOTE [Sync pairs]).

#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "reduce_function.h"
#include "sigpipe_block.h"
#include "sparse_context.h"

namespace ddph::comm::gloo_direct {

// NOTE [Exchange allreduce]: up to this world size every pair is connected, and an allreduce of a
// large payload is one exchange: every rank sends its buffer to every other rank and reduces the
// W buffers itself, in rank order (so every rank gets the same bits). One round instead of the
// ring's 2(W-1) rounds of at least two segments each: a rank blocks once per allreduce, not
// 4(W-1) times, which is what a step costs when W rank processes share 2 cores.
// (kFullMeshUpTo, kExchangeUpTo: sparse_context.h)
constexpr std::uint8_t kExchangeSlot = 0x43;


// NOTE [Sync pairs]: design-notes.md#synchronous-pairs-where-the-w--2-step-went. On Gloo's
// asynchronous pairs every message of the exchange waits for a woken loop thread, which busy ranks
// delay (0.4 ms per 400 KB allreduce idle, 1.3-1.7 ms with ranks computing, W = 2, 2 cores). So
// the exchange has its own pairs in Gloo's synchronous mode: the calling thread reads and writes
// the socket itself, with bound buffers. It runs in rounds of disjoint pairs (r with r XOR k), the
// lower rank writing first, so blocking writes never wait on each other; the sockets carry the
// connect timeout (SO_RCVTIMEO/SO_SNDTIMEO), so it is used only while the communicator's timeout
// is still that one; a peer that left is EOF, ECONNRESET or EPIPE (SIGPIPE blocked), a
// ProtocolError at once. Busy polling only where ranks do not outnumber hardware threads;
// GlooWait::kAuto is kSync.
constexpr int kSyncSlotBase = 0x100;  // bound buffers: slot kSyncSlotBase + sender's rank

/// Every rank ends with the reduction, in rank order, of every rank's `n` elements; the other
/// ranks' buffers land in a scratch buffer kept between calls. One per communicator and thread.
class ExchangeAllreduce {
 public:
  explicit ExchangeAllreduce(SparseContext& context) : context_(context) {}

  /// Over Gloo's asynchronous pairs (unbound buffers, the device loop thread moves the bytes).
  template <typename T>
  void run(T* data, std::size_t n, ReduceOp op, std::uint32_t tag, Clock::time_point deadline) {
    const std::size_t bytes = n * sizeof(T);
    const auto slot = gloo::Slot::build(kExchangeSlot, tag);
    const auto w = static_cast<std::size_t>(context_.size);
    scratch_.resize(std::max(scratch_.size(), bytes * w));
    auto all = context_.createUnboundBuffer(scratch_.data(), bytes * w);
    auto mine = context_.createUnboundBuffer(data, bytes);
    for (int r = 0; r < context_.size; ++r) {
      if (r != context_.rank) all->recv(r, slot, static_cast<std::size_t>(r) * bytes, bytes);
    }
    for (int r = 0; r < context_.size; ++r) {
      if (r != context_.rank) mine->send(r, slot, 0, bytes);
    }
    for (int i = 1; i < context_.size; ++i) checkCompleted(all->waitRecv(timeLeft(deadline)));
    for (int i = 1; i < context_.size; ++i) checkCompleted(mine->waitSend(timeLeft(deadline)));
    reduceInRankOrder(data, n, op);
  }

  /// Over the synchronous pairs (NOTE [Sync pairs]), in rounds of disjoint pairs; their sockets
  /// carry the deadline.
  template <typename T>
  void runSync(T* data, std::size_t n, ReduceOp op) {
    const ScopedSigpipeBlock noSigpipe;  // a peer that left: EPIPE, not a dead process
    const std::size_t bytes = n * sizeof(T);
    const auto w = static_cast<std::size_t>(context_.size);
    scratch_.resize(std::max(scratch_.size(), bytes * w));
    int rounds = 1;
    while (rounds < context_.size) rounds *= 2;
    for (int k = 1; k < rounds; ++k) {
      const int peer = context_.rank ^ k;
      if (peer >= context_.size) continue;
      gloo::transport::Pair* pair = context_.syncPair(peer);
      // Slot = sender's rank: the send buffer's slot is never registered here (a buffer's
      // destructor unregisters its slot, whichever buffer holds it).
      auto in = pair->createRecvBuffer(kSyncSlotBase + peer,
                                       scratch_.data() + static_cast<std::size_t>(peer) * bytes,
                                       bytes);
      auto out = pair->createSendBuffer(kSyncSlotBase + context_.rank, data, bytes);
      if (context_.rank < peer) {
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

 private:
  // scratch_ holds every other rank's n elements at rank * n; data becomes their reduction with
  // this rank's, in rank order: ((x0 op x1) op x2) op ..., the partial result always the first
  // operand, so every rank computes the same bits (NaNs in max and min included). No copies: the
  // partial result up to this rank accumulates in rank 0's slot of scratch_ (received, free to
  // overwrite), the step with this rank's own x writes into data, the rest follows in data.
  template <typename T>
  void reduceInRankOrder(T* data, std::size_t n, ReduceOp op) {
    const auto reduce = reduceFunction<T>(op);
    T* in = reinterpret_cast<T*>(scratch_.data());
    const auto me = static_cast<std::size_t>(context_.rank);
    if (me > 0) {
      for (std::size_t r = 1; r < me; ++r) reduce(in, in, in + r * n, n);
      reduce(data, in, data, n);
    }
    for (std::size_t r = me + 1; r < static_cast<std::size_t>(context_.size); ++r) {
      reduce(data, data, in + r * n, n);
    }
  }

  SparseContext& context_;
  std::vector<char> scratch_;  // every other rank's elements, kept between calls
};

}  // namespace ddph::comm::gloo_direct
