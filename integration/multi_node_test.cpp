// ddp-sim launch --nnodes N -n M (docs/multi-node.md): what each emulated node gives its ranks
// (torchrun's and a SLURM step's variables, a host name, a Gloo address, M stand-in devices under
// --cpu), through the fork server and through --exec; the audit of the LOCAL_RANK bug that only
// the second node shows, and its healthy twin; bad node counts refused in one line.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "audited_launch.h"
#include "test_support.h"

using namespace std::chrono_literals;
using Json = nlohmann::json;

namespace ddph::test_support {
namespace {

const std::string kSim = DDPH_DDP_SIM;
const std::string kPython = DDPH_PYTHON;
const std::string kPrograms = std::string(DDPH_AUDIT_PROGRAMS_DIR) + "/multinode/";

// Each rank's "PROBE {...}" line of node_probe.py, by rank.
std::map<int, Json> probes(const std::string& out) {
  std::map<int, Json> found;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("]: PROBE ");
    if (line.rfind("[rank", 0) != 0 || at == std::string::npos) continue;
    found[std::stoi(line.substr(5, at - 5))] = Json::parse(line.substr(at + 9));
  }
  return found;
}

CommandResult launchProbe(const std::vector<std::string>& flags, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kSim, "launch", "--timeout", "240"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--", kPython, kPrograms + "node_probe.py"});
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, 300s);
}

std::string var(const Json& probe, const char* name) {
  const Json& v = probe["env"][name];
  return v.is_string() ? v.get<std::string>() : "(unset)";
}

// --nnodes 2 -n 2: rank r is local rank r % 2 on node r / 2, with every variable torchrun gives
// it, its node's host name three ways, and Gloo sockets on its node's address only.
void expectTwoNodesOfTwo(const CommandResult& r, bool slurm) {
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  const auto seen = probes(r.out);
  ASSERT_EQ(seen.size(), 4u) << r.out;
  std::map<int, std::set<std::string>> boundOnNode;
  for (const auto& [rank, p] : seen) {
    const int node = rank / 2, local = rank % 2;
    const std::string host = "node" + std::to_string(node);
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(var(p, "RANK"), std::to_string(rank));
    EXPECT_EQ(var(p, "LOCAL_RANK"), std::to_string(local));
    EXPECT_EQ(var(p, "GROUP_RANK"), std::to_string(node));
    EXPECT_EQ(var(p, "ROLE_RANK"), std::to_string(rank));
    EXPECT_EQ(var(p, "NODE_RANK"), "(unset)") << "torchrun does not set it";
    EXPECT_EQ(var(p, "LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(var(p, "WORLD_SIZE"), "4");
    EXPECT_EQ(var(p, "GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(var(p, "ROLE_WORLD_SIZE"), "4");
    EXPECT_EQ(var(p, "MASTER_ADDR"), "127.1.0.1");
    EXPECT_EQ(p["hostname"], host);
    EXPECT_EQ(p["platform_node"], host);
    EXPECT_EQ(p["uname_nodename"], host);
    EXPECT_EQ(p["sum"], 4);  // a real all_reduce across both nodes
    for (const auto& a : p["bound"]) {
      EXPECT_EQ(a, "127.1.0." + std::to_string(node + 1)) << "a socket on another node's address";
      boundOnNode[node].insert(a.get<std::string>());
    }
    if (slurm) {
      EXPECT_EQ(var(p, "SLURM_PROCID"), std::to_string(rank));
      EXPECT_EQ(var(p, "SLURM_LOCALID"), std::to_string(local));
      EXPECT_EQ(var(p, "SLURM_NODEID"), std::to_string(node));
      EXPECT_EQ(var(p, "SLURM_NTASKS"), "4");
      EXPECT_EQ(var(p, "SLURM_NTASKS_PER_NODE"), "2");
      EXPECT_EQ(var(p, "SLURM_NNODES"), "2");
      EXPECT_EQ(var(p, "SLURM_JOB_NODELIST"), "node[0-1]");
      EXPECT_EQ(var(p, "SLURMD_NODENAME"), host);
      EXPECT_NE(var(p, "SLURM_JOB_ID"), "(unset)");
      EXPECT_EQ(var(p, "SLURM_JOB_ID"), var(seen.begin()->second, "SLURM_JOB_ID"));
    } else {
      EXPECT_EQ(var(p, "SLURM_PROCID"), "(unset)");
    }
  }
  for (int node = 0; node < 2; ++node) {  // each node's Gloo bound its own address
    EXPECT_EQ(boundOnNode[node], std::set<std::string>{"127.1.0." + std::to_string(node + 1)});
  }
}

TEST(MultiNode, ForkedRanksHaveTheirNodesVariablesHostNameAndAddress) {
  const auto r = launchProbe({"--nnodes", "2", "-n", "2", "--slurm"}, {"--gloo"});
  EXPECT_FALSE(has(r.err, "each rank execs")) << "the fork server was meant to fork them\n" << r.err;
  expectTwoNodesOfTwo(r, /*slurm=*/true);
}

TEST(MultiNode, ExecdRanksHaveTheirNodesVariablesHostNameAndAddress) {
  expectTwoNodesOfTwo(launchProbe({"--exec", "--nnodes", "2", "-n", "2"}, {"--gloo"}), /*slurm=*/false);
}

TEST(MultiNode, UnderCpuEachNodeHasItsOwnDevices) {
  for (const std::vector<std::string>& gpus : {std::vector<std::string>{}, {"--gpus", "3"}}) {
    std::vector<std::string> flags = {"--cpu", "--nnodes", "2", "-n", "2"};
    flags.insert(flags.end(), gpus.begin(), gpus.end());
    const auto r = launchProbe(flags, {"--cuda"});
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
    const auto seen = probes(r.out);
    ASSERT_EQ(seen.size(), 4u) << r.out;
    const int count = gpus.empty() ? 2 : 3;  // the ranks per node, unless --gpus says
    std::vector<bool> works(static_cast<std::size_t>(count), true);
    works.push_back(false);  // set_device(count) fails as CUDA's "invalid device ordinal"
    for (const auto& [rank, p] : seen) {
      EXPECT_EQ(p["device_count"], count) << "rank " << rank;
      EXPECT_EQ(p["set_device"].get<std::vector<bool>>(), works) << "rank " << rank;
    }
  }
}

Audited auditNodes(int nodes, int perNode, const std::string& program,
                   const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {kPython, kPrograms + program};
  argv.insert(argv.end(), args.begin(), args.end());
  return launchAudited(perNode, argv, 240, {"--cpu", "--nnodes", std::to_string(nodes)});
}

TEST(MultiNode, ASamplerGivenLocalRankPassesOnOneNodeAndFailsOnTwo) {
  const auto one = auditNodes(1, 4, "sampler_local_rank.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  EXPECT_FALSE(one.report["seen"].contains("ranks_per_node")) << shown(one);
  const auto two = auditNodes(2, 2, "sampler_local_rank.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  ASSERT_EQ(two.report["violations"].size(), 2u) << shown(two);
  const Json v = onlyViolation(two, "coverage");
  EXPECT_TRUE(has(v["detail"].get<std::string>(), "256 of 512 indices are on no rank")) << shown(two);
  EXPECT_EQ(onlyViolation(two, "disjointness")["likely_cause"], v["likely_cause"]) << shown(two);
  EXPECT_EQ(v["likely_cause"],
            "sampler 0's rank is LOCAL_RANK, not RANK: ranks 0 and 2 (local rank 0 on nodes 0 and "
            "1) drew the same samples");
  EXPECT_EQ(v["help"],
            "pass rank=dist.get_rank() (or leave rank and num_replicas to DistributedSampler)");
  EXPECT_EQ(two.report["seen"]["ranks_per_node"],
            Json::array({"node 0 (node0): ranks 0, 1 (local ranks 0, 1)",
                         "node 1 (node1): ranks 2, 3 (local ranks 0, 1)"}));
  EXPECT_TRUE(has(two.command.out + two.command.err, "  ranks per node:\n    node 0 (node0)"))
      << shown(two);
}

TEST(MultiNode, NumReplicasFromDeviceCountIsNamedToo) {
  const auto a = auditNodes(2, 2, "sampler_local_rank.py", {"--replicas-per-node"});
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "disjointness");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "sampler 0's rank is LOCAL_RANK and its num_replicas LOCAL_WORLD_SIZE (2), not "
                  "RANK and WORLD_SIZE (4): ranks 1 and 3 (local rank 1 on nodes 0 and 1)"))
      << shown(a);  // the ranks the finding names
  EXPECT_EQ(v["help"], "pass rank=dist.get_rank() and num_replicas=dist.get_world_size() (or leave "
                       "rank and num_replicas to DistributedSampler)")
      << shown(a);
}

TEST(MultiNode, TheHealthyTwinPassesOnOneNodeAndOnTwo) {
  for (const auto& [nodes, perNode] : {std::pair{1, 4}, std::pair{2, 2}}) {
    const auto a = auditNodes(nodes, perNode, "sampler_global_rank.py");
    EXPECT_EQ(a.command.exitCode, 0) << nodes << " nodes\n" << shown(a);
    EXPECT_TRUE(a.report["violations"].empty()) << shown(a);
  }
}

TEST(MultiNode, DataSeededFromLocalRankIsSharedAcrossNodes) {
  // NOTE [Ranks that share a dataset of their own]: invisible on one node.
  const auto one = auditNodes(1, 4, "seed_from_local_rank.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "seed_from_local_rank.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  ASSERT_EQ(two.report["violations"].size(), 1u) << shown(two);
  const Json v = onlyViolation(two, "disjointness");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(two);
  EXPECT_TRUE(has(v["detail"].get<std::string>(), "but ranks 0, 2; ranks 1, 3 hold the same one"))
      << shown(two);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "the same LOCAL_RANK on different nodes: the data was made or picked from "
                  "LOCAL_RANK"))
      << shown(two);
  const auto twin = auditNodes(2, 2, "seed_from_local_rank.py", {"--global-rank"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, GradientsAveragedWithinANodeGroupOnlyAreNamed) {
  // NOTE [Hand-written gradient averaging]: each node's group used as the world.
  const auto one = auditNodes(1, 4, "node_group_as_world.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "node_group_as_world.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "replica-consistency");
  // The cause names a rank of the side that parted (two against two: either node's).
  const std::string cause = v["likely_cause"].get<std::string>();
  EXPECT_TRUE(has(cause, "all-reduces its gradients only within group 1 (ranks 0, 1 of the 4 "
                         "ranks, all on node 0), never across the world") ||
              has(cause, "all-reduces its gradients only within group 2 (ranks 2, 3 of the 4 "
                         "ranks, all on node 1), never across the world"))
      << shown(two);
  const auto twin = auditNodes(2, 2, "node_group_as_world.py", {"--hierarchical"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, AHierarchicalAllReduceWithoutItsBroadcastIsNamed) {
  // One flattened gradient buffer (a replica declared by its size), summed within the node and
  // across the leaders; the other local ranks never get the cross-node sum.
  const auto one = auditNodes(1, 4, "node_group_as_world.py", {"--leaders"});
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "node_group_as_world.py", {"--leaders"});
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({1, 3})) << shown(two);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "rank 1 all-reduces its gradients only within group 1 (ranks 0, 1 of the 4 "
                  "ranks, all on node 0)"))
      << shown(two);
  EXPECT_TRUE(has(v["help"].get<std::string>(), "broadcast the sum within each node")) << shown(two);
  const auto twin = auditNodes(2, 2, "node_group_as_world.py", {"--leaders", "--broadcast"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

// The same per-node group given to DDP(model, process_group=...): DDP averages within each node.
TEST(MultiNode, DdpBuiltOverANodeGroupIsNamed) {
  const auto one = auditNodes(1, 4, "node_group_as_world.py", {"--ddp"});
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "node_group_as_world.py", {"--ddp"});
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "replica-consistency");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "DDP module 0 averages its gradients within group 1 (ranks 0, 1) and group 2 "
                  "(ranks 2, 3), not across the 4 ranks"))
      << shown(two);
  EXPECT_TRUE(has(v["help"].get<std::string>(), "leave process_group out")) << shown(two);
  const auto twin = auditNodes(2, 2, "node_group_as_world.py", {"--ddp", "--world"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, AShareSplitByNodeRankFromAVariableTorchrunDoesNotSetIsNamed) {
  // NOTE [The same share on every node]: NODE_RANK is not set (torchrun does not), so both nodes
  // read block 0; the orders of one local rank repeat across the nodes.
  const auto one = auditNodes(1, 4, "shards_from_node_rank.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "shards_from_node_rank.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "coverage");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "ranks 0 and 2 (local rank 0 on nodes 0 and 1); ranks 1 and 3 (local rank 1 on "
                  "nodes 0 and 1) drew the same samples in the same order: NodeBlockSampler splits "
                  "the data by the local rank but not by the node"))
      << shown(two);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(), "NODE_RANK, which torchrun does not set"))
      << shown(two);
  EXPECT_TRUE(has(v["help"].get<std::string>(), "GROUP_RANK")) << shown(two);
  const auto twin = auditNodes(2, 2, "shards_from_node_rank.py", {"--group-rank"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, ShardFilesSplitByNodeThenByLocalRankPassAndAreJudgedPerNode) {
  // NOTE [A split in two levels]: each node's ranks share the node's own files and split them
  // with DistributedSampler(num_replicas=LOCAL_WORLD_SIZE, rank=LOCAL_RANK).
  const auto one = auditNodes(1, 4, "node_shard_files.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "node_shard_files.py");
  EXPECT_EQ(two.command.exitCode, 0) << shown(two);
  bool said = false;
  for (const auto& n : two.report["notes"]) {
    said = said || has(n.get<std::string>(), "each shared by a group of 2 ranks (ranks 0, 1; ranks "
                                             "2, 3), one group per node");
  }
  EXPECT_TRUE(said) << shown(two);
  // Every node reads node 0's files (NODE_RANK, which torchrun does not set): one dataset, split
  // by the local rank on both nodes.
  const auto bug = auditNodes(2, 2, "node_shard_files.py", {"--node-from-env"});
  EXPECT_EQ(bug.command.exitCode, 1) << shown(bug);
  const Json v = onlyViolation(bug, "disjointness");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(), "ranks 0 and 2 (local rank 0 on nodes 0 and 1)"))
      << shown(bug);
  const auto bugOnOne = auditNodes(1, 4, "node_shard_files.py", {"--node-from-env"});
  EXPECT_EQ(bugOnOne.command.exitCode, 0) << shown(bugOnOne);
}

TEST(MultiNode, ALoaderOnlyNodeLeadersBuildIsMatchedAcrossRanksAndItsShardsRead) {
  // NOTE [Loaders that only some ranks build]: the leaders' training loader and everyone's
  // validation loader get different ids on the ranks until matched by the line that made them.
  const auto two = auditNodes(2, 2, "node_leader_dispatch.py");
  EXPECT_EQ(two.command.exitCode, 0) << shown(two);
  bool said = false;
  for (const auto& n : two.report["notes"]) {
    said = said || has(n.get<std::string>(), "iterated on ranks 0, 2 only, whose samplers are all 2 "
                                             "of its replicas");
  }
  EXPECT_TRUE(said) << shown(two);
  const auto one = auditNodes(1, 4, "node_leader_dispatch.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto bug = auditNodes(2, 2, "node_leader_dispatch.py", {"--same-node-rank"});
  EXPECT_EQ(bug.command.exitCode, 1) << shown(bug);
  const Json v = onlyViolation(bug, "coverage");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(), "ranks 0, 2 as replica 0")) << shown(bug);
}

// NOTE [Data of each node's own]: each node reads its own files under a sampler over the world.
TEST(MultiNode, NodeFilesUnderAWorldSamplerAreNamedAsDataOfEachNodesOwn) {
  const auto bug = auditNodes(2, 2, "node_shard_files.py", {"--global-sampler"});
  EXPECT_EQ(bug.command.exitCode, 1) << shown(bug);
  const Json v = onlyViolation(bug, "coverage");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "each node holds data of its own (every rank of a node the same, the nodes "
                  "other data"))
      << shown(bug);
  EXPECT_TRUE(has(v["help"].get<std::string>(), "num_replicas=LOCAL_WORLD_SIZE, rank=LOCAL_RANK"))
      << shown(bug);
  const auto bugOnOne = auditNodes(1, 4, "node_shard_files.py", {"--global-sampler"});
  EXPECT_EQ(bugOnOne.command.exitCode, 0) << shown(bugOnOne);  // one node: one dataset
}

TEST(MultiNode, NewGroupCalledForTheOwnNodeOnlyIsNamedFromTheCalls) {
  // NOTE [new_group is the world's call]: ranks 0, 1 ask for [0, 1], ranks 2, 3 for [2, 3].
  const auto two = auditNodes(2, 2, "node_groups_own_only.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "collective-mismatch");
  EXPECT_TRUE(has(v["detail"].get<std::string>(),
                  "the ranks' new_group call 1 differs: ranks 0, 1 called new_group([0, 1]) at "
                  "node_groups_own_only.py:25 in node_group; ranks 2, 3 called new_group([2, 3])"))
      << shown(two);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "each rank asked new_group only for the group it belongs to"))
      << shown(two);
  EXPECT_TRUE(has(v["help"].get<std::string>(), "dist.new_subgroups()")) << shown(two);
  const auto one = auditNodes(1, 4, "node_groups_own_only.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto twin = auditNodes(2, 2, "node_groups_own_only.py", {"--every-group"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, AnInitialBroadcastWithinEachNodeIsNamed) {
  // Hand averaging: each node's leader broadcasts its own initial weights within the node only.
  const auto two = auditNodes(2, 2, "broadcast_within_node.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "replica-consistency");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "received the initial parameters by broadcast within group 1 (ranks 0, 1) only"))
      << shown(two);
  const auto one = auditNodes(1, 4, "broadcast_within_node.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto twin = auditNodes(2, 2, "broadcast_within_node.py", {"--world"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, ShardsShuffledWithTheNodesSeedAreNamed) {
  // NOTE [Samples on two ranks in other batches]: no batch is on two ranks, their samples are.
  const auto one = auditNodes(1, 4, "shards_per_node_seed.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "shards_per_node_seed.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "disjointness");
  EXPECT_TRUE(has(v["detail"].get<std::string>(), "consumed the same samples in other batches"))
      << shown(two);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "the ranks of one node never share a sample, but ranks of different nodes do"))
      << shown(two);
  const auto twin = auditNodes(2, 2, "shards_per_node_seed.py", {"--shared-seed"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, AnEvaluationOnLocalRankZeroIsCountedOncePerNode) {
  // NOTE [What a metric summed]: the all_reduce after the two nodes' evaluations summed 2 x 200.
  const auto one = auditNodes(1, 4, "eval_on_local_rank0.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "eval_on_local_rank0.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "no-duplicates");
  EXPECT_EQ(v["ranks"], Json::array({0, 2})) << shown(two);
  EXPECT_TRUE(has(v["detail"].get<std::string>(), "ranks 0, 2 each evaluated the whole set (200 "
                                                  "samples), and the all_reduce after it summed "
                                                  "400"))
      << shown(two);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(), "the evaluation runs where LOCAL_RANK == 0"))
      << shown(two);
  const auto twin = auditNodes(2, 2, "eval_on_local_rank0.py", {"--global"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
}

TEST(MultiNode, ASamplerRankOfNodePlusLocalRankIsNamedWithItsFormula) {
  const auto one = auditNodes(1, 4, "sampler_local_rank.py", {"--node-plus-local"});
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "sampler_local_rank.py", {"--node-plus-local"});
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  const Json v = onlyViolation(two, "coverage");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "rank 1 (local rank 1 on node 0), rank 2 (local rank 0 on node 1) all pass "
                  "rank=1): the sampler's rank is the node's rank plus the local rank"))
      << shown(two);
}

TEST(MultiNode, ADeviceChosenByRankPassesOnOneNodeAndIsNamedOnTwo) {
  const auto one = auditNodes(1, 4, "device_from_rank.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
  const auto two = auditNodes(2, 2, "device_from_rank.py");
  EXPECT_EQ(two.command.exitCode, 1) << shown(two);
  // Ranks 2 and 3 both fail; which raised first (listed first) is the scheduler's choice.
  const auto failures = violationsOf(two, "rank-failure");
  ASSERT_FALSE(failures.empty()) << shown(two);
  const std::string cause = failures[0]["likely_cause"].get<std::string>();
  EXPECT_TRUE(has(cause, "rank 2 (local rank 0 on node 1) asked for device 2, but its node has 2") ||
              has(cause, "rank 3 (local rank 1 on node 1) asked for device 3, but its node has 2"))
      << shown(two);
  EXPECT_TRUE(has(failures[0]["help"].get<std::string>(), "use the node-local LOCAL_RANK"))
      << shown(two);
}

// A port below the kernel's ephemeral range (no connection takes it by chance) that binds on
// 127.0.0.1 now: the static rendezvous both torchrun agents meet at.
int unusedFixedPort() {
  for (int port = 20000 + static_cast<int>(::getpid() % 9000); port < 32000; port += 97) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

// Node `node` of a real two-node job: torchrun's agent with --nnodes 2 --node_rank `node` and 2
// ranks, each `python3 -m ddph_audit --cpu --trace-dir FOLDER` (its node's own trace folder, as on
// nodes without a shared file system).
std::vector<std::string> torchrunAgent(int node, int port, const std::string& tmp,
                                       const std::string& folder, const std::string& program) {
  return {"/usr/bin/env", std::string("PYTHONPATH=") + DDPH_PYTHON_PACKAGE_DIR, "TMPDIR=" + tmp,
          kPython, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank",
          std::to_string(node), "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
          "--master_port", std::to_string(port), "--rdzv_id", "ddph-two-agents", "--redirects",
          "9:0", "--tee", "9:0", "-m", "ddph_audit", "--cpu", "--trace-dir", folder, program};
}

TEST(MultiNode, ARealTwoAgentTorchrunIsAuditedFromItsNodesFolders) {
  TempDir dir("ddph-multi-node");
  const int port = unusedFixedPort();
  ASSERT_NE(port, 0);
  const std::string node0 = dir.path() + "/node0", node1 = dir.path() + "/node1";
  std::filesystem::create_directory(node0);
  std::filesystem::create_directory(node1);
  const std::string program = kPrograms + "sampler_local_rank.py";
  const auto agents = runCommands({torchrunAgent(0, port, dir.path(), node0, program),
                                   torchrunAgent(1, port, dir.path(), node1, program)},
                                  300s);
  for (const auto& a : agents) {
    if (a.exitCode != 0 && has(a.err, "use_libuv was requested but PyTorch was buil")) {
      GTEST_SKIP() << "this torch's torchrun cannot start: built without libuv (docs/torch2.md)";
    }
    ASSERT_EQ(a.exitCode, 0) << a.out << a.err;  // the program itself runs to its end
  }
  EXPECT_TRUE(std::filesystem::exists(node0 + "/rank-0.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(node1 + "/rank-2.jsonl"));
  const std::string report = dir.path() + "/report.json";
  const auto audit = runCommand({kSim, "audit", node0, node1, "--report", report}, 120s);
  EXPECT_EQ(audit.exitCode, 1) << audit.out << audit.err;
  EXPECT_TRUE(has(audit.out, "(4 of 4 ranks traced): FAILED")) << audit.out;
  const Json r = Json::parse(readFile(report));
  // Half the samples on no rank, the other half on two: both promises broken, one cause
  // (NOTE [A split that loses and copies]).
  ASSERT_EQ(r["violations"].size(), 2u) << r.dump(2);
  EXPECT_EQ(r["violations"][0]["property"], "coverage") << r.dump(2);
  EXPECT_EQ(r["violations"][1]["property"], "disjointness") << r.dump(2);
  for (const auto& v : r["violations"]) {
    EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                    "sampler 0's rank is LOCAL_RANK, not RANK: ranks 0 and 2 (local rank 0 on "
                    "nodes 0 and 1)"))
        << r.dump(2);
  }
  EXPECT_EQ(r["seen"]["ranks_per_node"].size(), 2u) << r.dump(2);
}

// NOTE [A checkpoint on some nodes only]: the best epoch's weights written by global rank 0 into
// a node-local folder, loaded where the file exists: node 0's ranks go back, node 1's do not.
TEST(MultiNode, ABestCheckpointOnOneNodesLocalDiskIsNamedByTheNodesThatLoadedIt) {
  TempDir dir("ddph-node-ckpt");
  const auto a = auditNodes(2, 2, "best_checkpoint_node_local.py", {"--ckpt-root", dir.path()});
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = onlyViolation(a, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({0, 1})) << shown(a);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "ranks 0, 1 (every rank of node 0, and no other) hold the parameters they had "
                  "at the start of epoch"))
      << shown(a);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(), "a node-local directory or disk"))
      << shown(a);
  EXPECT_TRUE(has(v["help"].get<std::string>(), "on each node's local rank 0")) << shown(a);
  TempDir twinDir("ddph-node-ckpt");
  const auto twin = auditNodes(2, 2, "best_checkpoint_node_local.py",
                               {"--ckpt-root", twinDir.path(), "--per-node-writer"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);
  TempDir oneDir("ddph-node-ckpt");
  const auto one = auditNodes(1, 4, "best_checkpoint_node_local.py", {"--ckpt-root", oneDir.path()});
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);  // one node: every rank finds the file
}

// NOTE [Post-local SGD]: the replicas meet only at the averager's steps; an averager over a
// node's group never brings the nodes together.
TEST(MultiNode, PostLocalSgdAveragedPerNodeIsNamedAndAveragedOverTheWorldPasses) {
  const auto bug = auditNodes(2, 2, "post_local_sgd_averager.py");
  EXPECT_EQ(bug.command.exitCode, 1) << shown(bug);
  const Json v = onlyViolation(bug, "replica-consistency");
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "DDP reduces the gradients with post_localSGD_hook: after its "
                  "start_localSGD_iter it averages them within its subgroup only"))
      << shown(bug);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(), "here they part by node")) << shown(bug);
  const auto twin = auditNodes(2, 2, "post_local_sgd_averager.py", {"--world-averager"});
  EXPECT_EQ(twin.command.exitCode, 0) << shown(twin);  // replicas differ between averages
  const auto one = auditNodes(1, 4, "post_local_sgd_averager.py");
  EXPECT_EQ(one.command.exitCode, 0) << shown(one);
}

// An evaluation on every rank is judged by what it counts: the node's view of the world in the
// validation sampler is one no-duplicates finding, its cause the sampler's LOCAL_RANK.
TEST(MultiNode, AValidationSamplerGivenTheNodesWorldIsOneNoDuplicatesFinding) {
  const auto bug = auditNodes(2, 2, "val_sampler_local_world.py");
  EXPECT_EQ(bug.command.exitCode, 1) << shown(bug);
  ASSERT_EQ(bug.report["violations"].size(), 1u) << shown(bug);
  const Json v = onlyViolation(bug, "no-duplicates");
  EXPECT_TRUE(has(v["detail"].get<std::string>(), "the ranks evaluated 256 samples for 128 distinct"))
      << shown(bug);
  EXPECT_TRUE(has(v["likely_cause"].get<std::string>(),
                  "sampler 1's rank is LOCAL_RANK and its num_replicas LOCAL_WORLD_SIZE (2)"))
      << shown(bug);
  EXPECT_FALSE(has(v["likely_cause"].get<std::string>(), "pads")) << shown(bug);
  EXPECT_EQ(auditNodes(1, 4, "val_sampler_local_world.py").command.exitCode, 0);
  EXPECT_EQ(auditNodes(2, 2, "val_sampler_local_world.py", {"--global"}).command.exitCode, 0);
}

TEST(MultiNode, BadNodeCountsAreOneLineAndExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--nnodes", "0", "-n", "2"}, "ddp-sim: error: --nnodes must be positive, got 0\n"},
      {{"--nnodes", "2", "-n", "0"}, "ddp-sim: error: -n must be positive, got 0\n"},
      {{"--nnodes", "64", "-n", "64"}, "(W = 4096) is above the launcher's limit of 2048 ranks"},
      {{"--nnodes", "2", "-n", "1000"}, "each node's 1000 ranks bind a port for each of their 1999 peers"},
  };
  for (const auto& [flags, expected] : cases) {
    std::vector<std::string> argv = {kSim, "launch"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", kPython, kPrograms + "node_probe.py"});
    const auto r = runCommand(argv, 60s);
    EXPECT_EQ(r.exitCode, 2) << flags[1] << " " << flags[3] << "\n" << r.err;
    EXPECT_TRUE(has(r.err, expected)) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");  // no rank ran
  }
}

}  // namespace
}  // namespace ddph::test_support
