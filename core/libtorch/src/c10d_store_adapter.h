#pragma once
// c10d::Store over any RendezvousStore (the local store of `ddp-sim run`), for c10d's
// ProcessGroupGloo; c10d's own stores are handed over as they are.

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include "ddph/comm/rendezvous_store.h"

namespace ddph::libtorch {

/// The c10d store behind `store`: its own where it is c10d's, else an adapter that keeps `store`
/// alive. The adapter serves what ProcessGroupGloo uses (set, get, add, wait); check, deleteKey
/// and getNumKeys throw.
c10::intrusive_ptr<c10d::Store> asC10dStore(const std::shared_ptr<comm::RendezvousStore>& store);

}  // namespace ddph::libtorch
