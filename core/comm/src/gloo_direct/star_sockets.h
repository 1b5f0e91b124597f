#pragma once
// Private to the direct Gloo engine: the star collectives of large worlds over plain blocking
// sockets, without Gloo's device (NOTE [Star sockets]).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ddph/comm/rendezvous_store.h"

namespace ddph::comm::gloo_direct {

// NOTE [Star sockets]: every Gloo TCP device runs a loop thread that wakes every 10 ms
// (epoll_wait's timeout in gloo/transport/tcp/loop.cc) whether or not a byte moves: 100 wake-ups
// a second per rank, 100,000 at W = 1024, which on 2 cores took most of the CPU (perf: 72 % of
// the samples of a W = 512 run in epoll_wait and the context switches around it) and slowed the
// fork, the connect and every collective alike. Above starCollectivesAbove every collective of
// the direct engine is a star through rank 0 (NOTE [Collectives at scale]), so those worlds need
// no Gloo at all: each rank holds one TCP connection to rank 0 on loopback (rank 0 listens on its
// own address, published in the store), and the calling thread writes and reads it itself,
// sleeping in poll(2) under the collective's deadline. An idle rank costs no CPU; a collective
// wakes each rank once and rank 0 at most W times. Every message carries the collective's tag and
// length, so ranks that call different collectives fail with a ProtocolError instead of reading
// each other's bytes. Explained in docs/design-notes.md#scale-2048-ranks-on-2-cores.
class StarSockets {
 public:
  using Clock = std::chrono::steady_clock;

  /// Connects rank `rank` of `size` (size > 1): rank 0 listens on `hostname` and publishes its
  /// address under `prefix`, the others connect to it from `hostname`. Throws TimeoutError past
  /// `deadline`.
  StarSockets(RendezvousStore& store, const std::string& prefix, int rank, int size,
              const std::string& hostname, Clock::time_point deadline);
  ~StarSockets();
  StarSockets(const StarSockets&) = delete;
  StarSockets& operator=(const StarSockets&) = delete;

  /// As starGather (star.h): rank 0 receives every rank's `bytes` into `all` (rank r at
  /// r * bytes; null: a barrier, the bytes are dropped); the others send `mine`.
  void gather(const void* mine, std::size_t bytes, void* all, std::uint32_t tag,
              Clock::time_point deadline);

  /// As starBroadcast (star.h): every rank ends with `root`'s `bytes` at `data`.
  void broadcast(void* data, std::size_t bytes, int root, std::uint32_t tag,
                 Clock::time_point deadline);

 private:
  /// Rank 0: listens, publishes its address, and takes one connection from each other rank.
  void acceptRanks(RendezvousStore& store, const std::string& prefix, const std::string& hostname,
                   Clock::time_point deadline);
  /// The other ranks: connect to the address rank 0 published and name their rank.
  void connectToRank0(RendezvousStore& store, const std::string& prefix,
                      const std::string& hostname, Clock::time_point deadline);
  int fdOf(int peer) const;
  void send(int peer, std::uint32_t tag, const void* data, std::size_t bytes,
            Clock::time_point deadline);
  void recv(int peer, std::uint32_t tag, void* data, std::size_t bytes, Clock::time_point deadline);

  int rank_;
  int size_;
  std::vector<int> fds_;  // rank 0: one per rank (its own -1); the others: fds_[0], to rank 0
};

}  // namespace ddph::comm::gloo_direct
