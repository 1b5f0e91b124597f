#pragma once
// Gloo communicators. Two engines (NOTE [Gloo engines]): libgloo directly
// (gloo_direct_communicator.cpp, the default) or c10d's ProcessGroupGloo
// (libtorch/process_group_gloo.cpp, PyTorch's own path, in the on-demand LibTorch library).
//
// Two ways to build a world:
//  - thread-per-rank: one process, a shared in-process store (makeInProcessStore), one thread per
//    rank calling connectGloo(store, rank, W): fast unit tests, no ports;
//  - process-per-rank: a TCPStore hosted by rank 0 (as PyTorch's env:// does), see rank_env.h.
// Each rank may bind its own loopback address (127.0.x.y): with every rank on 127.0.0.1 c10d's full
// mesh runs out of ephemeral ports near 256 ranks (NOTE [Loopback address per rank]).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddph/comm/communicator.h"
#include "ddph/comm/rendezvous_store.h"

namespace ddph::comm {

/// Which code runs the collectives (NOTE [Gloo engines]).
enum class GlooEngine {
  /// libgloo directly, on the calling thread, over a sparse set of connected pairs
  /// (gloo_direct_communicator.cpp).
  kDirect,
  /// c10d's ProcessGroupGloo over a full mesh, collectives on its worker thread (as PyTorch).
  kProcessGroup,
};

/// How the direct engine's exchange allreduce (W <= 4, payloads over 64 KiB gathered) waits for
/// the bytes of its peers (NOTE [Sync pairs] in gloo_direct/exchange_allreduce.h). Programs read
/// DDPH_GLOO_WAIT=auto|loop-thread|sync|busy-poll at their edge (glooOptionsFromEnvironment).
/// Every rank of a world must agree on loop-thread or not (sync and busy-poll mix): where they
/// disagree, the ranks that want synchronous pairs fail their connect with a TimeoutError.
enum class GlooWait {
  /// kSync: busy polling gained under 10 % with a core per rank on a quiet machine and lost
  /// 1.8x beside one other busy process (NOTE [Sync pairs]).
  kAuto,
  /// Gloo's asynchronous pairs: its device loop thread reads every message (after a
  /// ready-to-receive notice from the receiver) and wakes the waiting caller.
  kLoopThread,
  /// Gloo's synchronous pairs: the calling thread reads and writes the socket itself, blocking in
  /// recv(2) until the bytes are there; no loop thread, no notices.
  kSync,
  /// kSync, but the caller spins on a non-blocking recv(2) instead of sleeping in it: no wake-up
  /// at all, at the price of a core spinning while it waits. Only where the world has no more
  /// ranks than this host has hardware threads (std::thread::hardware_concurrency()); kSync
  /// above that.
  kBusyPoll,
};

/// NOTE [Gloo engines]: both engines meet through the same RendezvousStore and give identical
/// results. kProcessGroup is PyTorch's own path: W(W-1)/2 connections made through W^2 store
/// reads of W addresses each (O(W^3) bytes through the store: 32 s of connecting at W = 256 on 2
/// cores), and every collective handed to a worker thread and back. kDirect connects only the pairs
/// its collectives use (rank 0 to every rank, each rank to its ring neighbours: under 3W
/// connections, one store key each) and runs each collective on the calling thread. Data-parallel
/// buffers at W <= 4 are allreduced as one exchange over a second set of pairs in Gloo's
/// synchronous mode (NOTE [Exchange allreduce], NOTE [Sync pairs]; GlooWait), above 4 ranks round
/// Gloo's ring (gloo::allreduce, gloo::allgather); small payloads and every collective above
/// starCollectivesAbove go through rank 0 (NOTE [Collectives at scale]).
/// Programs read DDPH_GLOO_ENGINE=process-group|direct at their edge (glooOptionsFromEnvironment);
/// the libraries take the option only. A build without the direct engine (NOTE [Which Gloo] in
/// CMakeLists.txt) runs kDirect on c10d's engine.
struct GlooOptions {
  GlooEngine engine = GlooEngine::kDirect;
  /// Deadline of connecting and of every collective.
  std::chrono::milliseconds timeout{30000};
  /// Address Gloo binds for this rank ("127.0.0.1", or loopbackAddressForRank(rank)).
  std::string hostname = "127.0.0.1";
  /// Gloo worker threads of the process group (1 keeps hundreds of ranks cheap; kProcessGroup only).
  int threads = 1;
  /// NOTE [Collectives at scale]: Gloo's allreduce and allgather are rings: 2(W-1) (or W-1)
  /// rounds in which every rank must run, O(W^2) process wake-ups per collective. With hundreds
  /// of rank processes on 2 cores that is seconds per collective. Above this world size,
  /// allreduce and allgather run as a Gloo gather to rank 0 (a star: W-1 messages) followed by a
  /// Gloo broadcast, O(W) wake-ups; results are identical (same data, same reduction). The direct
  /// engine also sends every payload of at most 64 KiB (gathered) through rank 0 at any W
  /// (NOTE [Star for small payloads]); its broadcast and barrier always go through rank 0.
  int starCollectivesAbove = 32;
  /// How the direct engine's exchange allreduce waits (GlooWait; kDirect only).
  GlooWait wait = GlooWait::kAuto;
};

/// `options` with DDPH_GLOO_ENGINE (direct|process-group) and DDPH_GLOO_WAIT
/// (auto|loop-thread|sync|busy-poll) applied where they are set: what a program (ddp-sim,
/// ddp-train, the benchmarks) calls once at its edge. Throws ConfigError naming a bad value, and
/// for DDPH_GLOO_ENGINE=direct in a build without the direct engine.
GlooOptions glooOptionsFromEnvironment(GlooOptions options = {});

/// NOTE [Loopback address per rank]: 127.0.x.y with x = 1 + r / 250, y = 1 + r % 250, so every
/// rank's sockets have their own ephemeral port range. All of 127/8 is loopback on Linux.
std::string loopbackAddressForRank(int rank);

/// Connects rank `rank` of `size` through `store` (blocking until every rank joined, or
/// TimeoutError). Uses a fresh key prefix per `groupName` so a store can host several groups.
std::unique_ptr<Communicator> connectGloo(std::shared_ptr<RendezvousStore> store, int rank,
                                          int size, const GlooOptions& options,
                                          const std::string& groupName = "default");

}  // namespace ddph::comm
