// launch::NodeLayout and its environment: what each emulated node of `ddp-sim launch --nnodes`
// gives its ranks (docs/multi-node.md).
#include "ddph/launch/nodes.h"

#include <gtest/gtest.h>

#include <set>

namespace ddph::launch {
namespace {

TEST(Nodes, RanksAreNumberedNodeByNodeAsTorchrunNumbersThem) {
  const NodeLayout layout{2, 4, false};
  EXPECT_EQ(layout.worldSize(), 8);
  EXPECT_EQ(layout.nodeOf(5), 1);
  EXPECT_EQ(layout.localRankOf(5), 1);
  const EnvMap env = nodeRankEnvironment(layout, 5);
  EXPECT_EQ(env.at("RANK"), "5");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("GROUP_RANK"), "1");
  EXPECT_EQ(env.at("ROLE_RANK"), "5");
  EXPECT_EQ(env.count("NODE_RANK"), 0u) << "torchrun does not set it";
  EXPECT_EQ(env.at("DDPH_NODE_ADDR"), "127.1.0.2");
  EXPECT_EQ(env.at("DDPH_NODE_HOSTNAME"), "node1");
  EXPECT_EQ(env.count("SLURM_PROCID"), 0u);
  const EnvMap common = nodeCommonEnvironment(layout, 42);
  EXPECT_EQ(common.at("WORLD_SIZE"), "8");
  EXPECT_EQ(common.at("LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(common.at("GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(common.at("ROLE_WORLD_SIZE"), "8");
  EXPECT_EQ(common.count("SLURM_NTASKS"), 0u);
}

TEST(Nodes, ASlurmStepHasItsVariablesToo) {
  const NodeLayout layout{2, 4, true};
  const EnvMap env = nodeRankEnvironment(layout, 6);
  EXPECT_EQ(env.at("SLURM_PROCID"), "6");
  EXPECT_EQ(env.at("SLURM_LOCALID"), "2");
  EXPECT_EQ(env.at("SLURM_NODEID"), "1");
  EXPECT_EQ(env.at("SLURMD_NODENAME"), "node1");
  const EnvMap common = nodeCommonEnvironment(layout, 42);
  EXPECT_EQ(common.at("SLURM_NTASKS"), "8");
  EXPECT_EQ(common.at("SLURM_NTASKS_PER_NODE"), "4");
  EXPECT_EQ(common.at("SLURM_NNODES"), "2");
  EXPECT_EQ(common.at("SLURM_JOB_NODELIST"), "node[0-1]");
  EXPECT_EQ(common.at("SLURM_JOB_ID"), "42");
  // Every per-rank name is kept from the fork server and sent with each fork.
  const auto names = nodeRankVariables(layout);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), env.size());
}

TEST(Nodes, EveryNodeHasItsOwnLoopbackAddressAndName) {
  EXPECT_EQ(nodeAddress(0), "127.1.0.1");
  EXPECT_EQ(nodeAddress(253), "127.1.0.254");
  EXPECT_EQ(nodeAddress(254), "127.1.1.1");
  std::set<std::string> seen;
  for (int k = 0; k < 2048; ++k) EXPECT_TRUE(seen.insert(nodeAddress(k)).second) << k;
  EXPECT_EQ(nodeHostname(3), "node3");
  EXPECT_EQ(slurmNodeList(1), "node0");
  EXPECT_EQ(slurmNodeList(12), "node[0-11]");
}

}  // namespace
}  // namespace ddph::launch
