// RendezvousStore over c10d's stores (HashStore, TCPStore).
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "ddph/comm/collective_errors.h"
#include "torch_parts.h"

namespace ddph::libtorch {
namespace {

using comm::detail::rethrowTyped;

class C10dStore final : public comm::RendezvousStore {
 public:
  C10dStore(c10::intrusive_ptr<c10d::Store> store, std::uint16_t port)
      : store_(std::move(store)), port_(port) {}

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override {
    store_->set(key, value);
  }

  std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout,
                                const std::string& step) override {
    try {
      store_->wait({key}, timeout);
      return store_->get(key);
    } catch (const std::exception& e) {
      rethrowTyped(e, fmt::format("store wait for '{}'", key), step, timeout);
    }
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return store_->add(key, delta);
  }

  std::uint16_t port() const override { return port_; }
  const void* c10dStore() const override { return &store_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::uint16_t port_;
};

}  // namespace

std::shared_ptr<comm::RendezvousStore> c10dHashStore() {
  return std::make_shared<C10dStore>(c10::make_intrusive<c10d::HashStore>(), 0);
}

std::shared_ptr<comm::RendezvousStore> c10dTcpStore(const std::string& host, std::uint16_t port,
                                                    bool isServer, int worldSize,
                                                    std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = port;
  opts.isServer = isServer;
  opts.numWorkers = static_cast<std::size_t>(worldSize);
  // Joining is checked by the process group's own rendezvous; not waiting here lets rank 0 start
  // connecting while the others are still being forked.
  opts.waitWorkers = false;
  opts.timeout = timeout;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(host, opts);
    const std::uint16_t bound = store->getPort();
    return std::make_shared<C10dStore>(std::move(store), bound);
  } catch (const std::exception& e) {
    rethrowTyped(e, fmt::format("TCPStore {} {}:{}", isServer ? "listen on" : "connect to", host,
                                port),
                 "init", timeout);
  }
}

}  // namespace ddph::libtorch
