#pragma once
// The rank runtime: what a rank process started by a launcher (ddp-sim launch, torchrun) reads
// from its environment, and how it joins the world, the way PyTorch's `env://` init does.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ddph/comm/communicator.h"
#include "ddph/comm/gloo_communicator.h"

namespace ddph::comm {

/// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
struct RankEnv {
  int rank = 0;
  int localRank = 0;
  int worldSize = 1;
  int localWorldSize = 1;
  std::string masterAddr = "127.0.0.1";
  std::uint16_t masterPort = 0;
};

/// Reads the variables; throws ConfigError naming the one that is missing or malformed.
RankEnv rankEnvFromEnvironment();

/// A joined world: the store (hosted by rank 0) and the Gloo communicator over it.
struct RankWorld {
  RankEnv env;
  std::shared_ptr<RendezvousStore> store;
  std::unique_ptr<Communicator> comm;
};

/// env:// init: rank 0 hosts a TCPStore on MASTER_ADDR:MASTER_PORT, every rank connects to it and
/// joins a Gloo world with `gloo`'s engine and wait mode (a program's edge passes
/// glooOptionsFromEnvironment()). `perRankLoopback` binds rank r's Gloo sockets to
/// loopbackAddressForRank(r). Every wait has `timeout` as its deadline.
RankWorld initRankWorld(const RankEnv& env, std::chrono::milliseconds timeout,
                        bool perRankLoopback = false, const GlooOptions& gloo = {});

}  // namespace ddph::comm
