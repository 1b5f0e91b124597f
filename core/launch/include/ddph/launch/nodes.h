#pragma once
// Emulated nodes of `ddp-sim launch --nnodes N -n M` (docs/multi-node.md): what each node gives
// its ranks on a real cluster (torchrun's per-node variables, a SLURM step's, a host name and an
// address of its own), on one machine.

#include <string>
#include <vector>

#include "ddph/launch/rank_spawner.h"

namespace ddph::launch {

/// N nodes of M ranks each: rank r is local rank r % M on node r / M, as torchrun numbers them.
struct NodeLayout {
  int nodes = 1;
  int perNode = 1;
  /// With a SLURM step's variables too (ddp-sim launch --slurm).
  bool slurm = false;

  int worldSize() const { return nodes * perNode; }
  int nodeOf(int rank) const { return rank / perNode; }
  int localRankOf(int rank) const { return rank % perNode; }
};

/// Node k's loopback address, which its Python ranks' Gloo binds: 127.1.(k / 254).(k % 254 + 1)
/// (node 0's, 127.1.0.1, is also MASTER_ADDR).
std::string nodeAddress(int node);

/// Node k's host name: "node<k>".
std::string nodeHostname(int node);

/// The nodes' host names in SLURM's compressed form: "node0", "node[0-1]".
std::string slurmNodeList(int nodes);

/// What every rank of the layout shares: WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE,
/// ROLE_WORLD_SIZE, ROLE_NAME, DDPH_NODES (and SLURM_NTASKS, SLURM_NNODES, … with slurm).
EnvMap nodeCommonEnvironment(const NodeLayout& layout, long jobId);

/// Rank r's own: RANK, LOCAL_RANK, GROUP_RANK, ROLE_RANK (not NODE_RANK, which torchrun does not set), its node's address and host
/// name for the Python ranks' emulation (DDPH_NODE_ADDR, DDPH_NODE_HOSTNAME), and with slurm
/// SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURMD_NODENAME.
EnvMap nodeRankEnvironment(const NodeLayout& layout, int rank);

/// The names nodeRankEnvironment sets (kept from the fork server, sent with each fork).
std::vector<std::string> nodeRankVariables(const NodeLayout& layout);

}  // namespace ddph::launch
