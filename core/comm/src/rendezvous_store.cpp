// The stores are c10d's, in the on-demand LibTorch library (libtorch/c10d_store.cpp).
#include "ddph/comm/rendezvous_store.h"

#include "ddph/common/libtorch_module.h"

namespace ddph::comm {

std::shared_ptr<RendezvousStore> makeInProcessStore() {
  return libtorch::backend().inProcessStore();
}

std::shared_ptr<RendezvousStore> makeTcpStore(const std::string& host, std::uint16_t port,
                                              bool isServer, int worldSize,
                                              std::chrono::milliseconds timeout) {
  return libtorch::backend().tcpStore(host, port, isServer, worldSize, timeout);
}

}  // namespace ddph::comm
