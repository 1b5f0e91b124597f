// Emulated nodes (nodes.h): the per-node environment torchrun and a SLURM step give their ranks.
#include "ddph/launch/nodes.h"

#include <fmt/format.h>

#include "ddph/common/environment.h"
namespace ddph::launch {

std::string nodeAddress(int node) {
  return fmt::format("127.1.{}.{}", node / 254, node % 254 + 1);
}

std::string nodeHostname(int node) { return fmt::format("node{}", node); }

std::string slurmNodeList(int nodes) {
  return nodes == 1 ? nodeHostname(0) : fmt::format("node[0-{}]", nodes - 1);
}

EnvMap nodeCommonEnvironment(const NodeLayout& layout, long jobId) {
  const std::string world = std::to_string(layout.worldSize());
  EnvMap env{{"WORLD_SIZE", world},
             {"LOCAL_WORLD_SIZE", std::to_string(layout.perNode)},
             {"GROUP_WORLD_SIZE", std::to_string(layout.nodes)},
             {"ROLE_WORLD_SIZE", world},
             {"ROLE_NAME", "default"},
             {common::env::kNodes, std::to_string(layout.nodes)}};
  if (!layout.slurm) return env;
  const std::string nodeList = slurmNodeList(layout.nodes);
  env.insert({{"SLURM_NTASKS", world},
              {"SLURM_NPROCS", world},
              {"SLURM_NTASKS_PER_NODE", std::to_string(layout.perNode)},
              {"SLURM_NNODES", std::to_string(layout.nodes)},
              {"SLURM_JOB_NUM_NODES", std::to_string(layout.nodes)},
              {"SLURM_JOB_NODELIST", nodeList},
              {"SLURM_NODELIST", nodeList},
              {"SLURM_STEP_NODELIST", nodeList},
              {"SLURM_JOB_ID", std::to_string(jobId)},
              {"SLURM_JOBID", std::to_string(jobId)},
              {"SLURM_STEP_ID", "0"}});
  return env;
}

EnvMap nodeRankEnvironment(const NodeLayout& layout, int rank) {
  const int node = layout.nodeOf(rank);
  const std::string r = std::to_string(rank), n = std::to_string(node),
                    local = std::to_string(layout.localRankOf(rank));
  // No NODE_RANK: torchrun does not set it (a platform's job script may), and a program that
  // reads it with a default of 0 puts every node on node 0's data (docs/multi-node.md).
  EnvMap env{{"RANK", r},
             {"LOCAL_RANK", local},
             {"GROUP_RANK", n},
             {"ROLE_RANK", r},
             {common::env::kNodeAddr, nodeAddress(node)},
             {common::env::kNodeHostname, nodeHostname(node)}};
  if (layout.slurm) {
    env.insert({{"SLURM_PROCID", r},
                {"SLURM_LOCALID", local},
                {"SLURM_NODEID", n},
                {"SLURMD_NODENAME", nodeHostname(node)}});
  }
  return env;
}

std::vector<std::string> nodeRankVariables(const NodeLayout& layout) {
  std::vector<std::string> names;
  for (const auto& [name, value] : nodeRankEnvironment(layout, 0)) names.push_back(name);
  return names;
}

}  // namespace ddph::launch
