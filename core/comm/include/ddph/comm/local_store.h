#pragma once
// The store the rank processes of one machine meet through: a Unix-domain socket in a folder only
// its user can enter, served by a thread of one process (rank 0 of `ddp-sim run`). No network
// listener at all, where c10d 1.13's TCPStore listens on every interface whatever host it is
// given. NOTE [Local store]: design-notes.md#the-local-store.

#include <chrono>
#include <memory>
#include <string>

#include "ddph/comm/rendezvous_store.h"

namespace ddph::comm {

/// Binds `path` (a socket path that must not exist yet, at most 107 bytes) and serves set, get
/// (waits for the key) and add to every process that connects, on a thread of its own, until
/// destroyed; the destructor stops the thread, closes every connection and removes `path`.
/// Throws ddph::common::Error (one line) when the socket cannot be bound.
class LocalStoreServer {
 public:
  explicit LocalStoreServer(std::string path);
  ~LocalStoreServer();
  LocalStoreServer(const LocalStoreServer&) = delete;
  LocalStoreServer& operator=(const LocalStoreServer&) = delete;

  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A client of the LocalStoreServer at `path`, connected before `timeout` (waiting for the socket
/// to appear: the server may start after the client); throws TimeoutError when it does not. Its
/// `get` waits on the server for the key; a server that is gone makes every call a ProtocolError.
std::shared_ptr<RendezvousStore> connectLocalStore(const std::string& path,
                                                   std::chrono::milliseconds timeout);

}  // namespace ddph::comm
