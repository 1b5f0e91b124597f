#pragma once
// The key-value store ranks meet through before they connect (PyTorch's c10d::Store: TCPStore
// across processes, HashStore across threads). Every engine connects through this interface; the
// stores themselves are c10d's, reached through the on-demand LibTorch library
// (ddph/common/libtorch_module.h): a program that never makes a store never loads LibTorch.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddph::comm {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;

  virtual void set(const std::string& key, const std::vector<std::uint8_t>& value) = 0;
  /// Waits for `key` until `timeout`; throws TimeoutError naming the key and `step`.
  virtual std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout,
                                        const std::string& step) = 0;
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;

  /// The port a TCP store listens on (0 for other stores).
  virtual std::uint16_t port() const { return 0; }

  /// The `c10::intrusive_ptr<c10d::Store>` behind this store, for code that hands it to a c10d
  /// process group (NCCL); null for a store that is not c10d's.
  virtual const void* c10dStore() const { return nullptr; }
};

/// An in-process store shared by thread ranks (c10d::HashStore).
std::shared_ptr<RendezvousStore> makeInProcessStore();

/// A TCP store (c10d::TCPStore): the server (rank 0) listens on host:port, clients connect to it.
/// `port` 0 on the server picks a free port (see RendezvousStore::port). Throws TimeoutError when the
/// server is not reachable before `timeout`.
std::shared_ptr<RendezvousStore> makeTcpStore(const std::string& host, std::uint16_t port,
                                              bool isServer, int worldSize,
                                              std::chrono::milliseconds timeout);

}  // namespace ddph::comm
