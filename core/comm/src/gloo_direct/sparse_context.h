#pragma once
// Private to the direct Gloo engine: the sparse set of Gloo pairs a rank connects (NOTE [Sparse
// connect]) and the waits every algorithm of the engine shares.

#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/comm/rendezvous_store.h"

namespace ddph::comm::gloo_direct {

using Clock = std::chrono::steady_clock;

/// Up to this world size every pair is connected (NOTE [Exchange allreduce]).
constexpr int kFullMeshUpTo = 8;
/// Up to this world size a large allreduce is one exchange (NOTE [Exchange allreduce]).
constexpr int kExchangeUpTo = 4;

/// What is left of `deadline`, at least 1 ms (Gloo takes 0 as "no deadline").
inline std::chrono::milliseconds timeLeft(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

/// Gloo's waits return false when the operation was aborted.
inline void checkCompleted(bool completed) {
  if (!completed) throw std::runtime_error("the Gloo operation was aborted");
}

struct WaitMode {
  bool syncPairs = false;
  bool busyPoll = false;
};

/// GlooOptions::wait resolved for this world (NOTE [Sync pairs] in exchange_allreduce.h).
WaitMode resolveWait(GlooWait wait, int size);

/// NOTE [Sparse connect]: the pairs a rank connects: rank 0 with every rank (the star collectives
/// and the barrier) and each rank with its ring neighbours (gloo::allreduce and gloo::allgather's
/// ring). Sorted: every rank connects its pairs in increasing peer order, so pair (a, b), a < b,
/// waits only for pairs that come before it in (min, max) order and the connect cannot deadlock
/// (the listening side of a pair is decided by Gloo from the two addresses, either side may wait).
std::vector<int> connectedPeers(int rank, int size);

/// A gloo::Context whose transport holds only the pairs of connectedPeers(); getPair() of any
/// other rank is null, so only collectives that stay on those pairs may run on it.
class SparseContext final : public gloo::Context {
 public:
  SparseContext(int rank, int size) : gloo::Context(rank, size) {}

  /// Connects the pairs of connectedPeers(); with `wait.syncPairs` and at most kExchangeUpTo
  /// ranks also a second full mesh of synchronous pairs for the exchange (NOTE [Sync pairs]).
  void connect(RendezvousStore& store, const std::string& prefix,
               std::shared_ptr<gloo::transport::Device> device, std::chrono::milliseconds timeout,
               WaitMode wait);

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
                                                         Clock::time_point deadline);

  // Declared after the base's device: destroyed (pairs closed) before it.
  std::shared_ptr<gloo::transport::Context> syncPairs_;
  std::chrono::milliseconds syncTimeout_{0};
};

}  // namespace ddph::comm::gloo_direct
