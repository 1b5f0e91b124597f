#include "sparse_context.h"

#include <fmt/format.h>

#include <set>
#include <thread>

namespace ddph::comm::gloo_direct {
namespace {

std::string pairKey(const std::string& prefix, int from, int to) {
  return fmt::format("{}/gloo-direct/{}/{}", prefix, from, to);
}

}  // namespace

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

void SparseContext::connect(RendezvousStore& store, const std::string& prefix,
                            std::shared_ptr<gloo::transport::Device> device,
                            std::chrono::milliseconds timeout, WaitMode wait) {
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

std::shared_ptr<gloo::transport::Context> SparseContext::connectPairs(
    RendezvousStore& store, const std::string& prefix, gloo::transport::Device& device,
    const std::vector<int>& peers, std::chrono::milliseconds timeout, Clock::time_point deadline) {
  std::shared_ptr<gloo::transport::Context> transport = device.createContext(rank, size);
  transport->setTimeout(timeout);
  // One small key per pair and direction: a rank reads only its peers' addresses for it
  // (c10d's full mesh reads every rank's whole address list).
  for (int peer : peers) {
    const std::vector<char> address = transport->createPair(peer)->address().bytes();
    store.set(pairKey(prefix, rank, peer), std::vector<std::uint8_t>(address.begin(), address.end()));
  }
  for (int peer : peers) {
    const auto bytes = store.get(pairKey(prefix, peer, rank), timeLeft(deadline), "init");
    transport->getPair(peer)->connect(std::vector<char>(bytes.begin(), bytes.end()));
  }
  return transport;
}

}  // namespace ddph::comm::gloo_direct
