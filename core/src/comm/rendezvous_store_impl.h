#pragma once
// Private to core/src/comm: what a RendezvousStore holds. Shared by the c10d adapters
// (gloo_communicator.cpp, nccl_communicator.cpp), the only files that may include c10d headers.

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>

#include "ddph/comm/gloo_communicator.h"

namespace ddph {

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  std::uint16_t port = 0;  ///< the TCP store's port (0 for other stores)
};

}  // namespace ddph
