// Node topology in the audit (docs/multi-node.md): a sampler given its node's view of the world
// (LOCAL_RANK for its rank, LOCAL_WORLD_SIZE for num_replicas) where the ranks span nodes, and the
// ranks each node held. From each rank's header (local_rank, local_world_size, node, hostname)
// against what its sampler said about itself.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "audit_checks.h"

namespace ddph::audit {

namespace {

// "0 and 2", "0, 2 and 4".
std::string joinAnd(const std::vector<std::int64_t>& values) {
  if (values.size() < 2) return fmt::format("{}", fmt::join(values, ""));
  const std::vector<std::int64_t> head(values.begin(), values.end() - 1);
  return fmt::format("{} and {}", fmt::join(head, ", "), values.back());
}

// "0-3", "0, 2, 5-7".
std::string ranges(const std::vector<std::int64_t>& sorted) {
  std::vector<std::string> parts;
  for (const auto& [first, last] : consecutiveRuns(sorted)) {
    parts.push_back(first == last ? fmt::format("{}", first)
                                  : fmt::format("{}{}{}", first, last == first + 1 ? ", " : "-", last));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::optional<Explanation> nodeTopologyCause(const std::vector<SamplerOnRank>& ranks,
                                             std::int64_t samplerId,
                                             const std::vector<std::int64_t>& named) {
  bool localRanks = !ranks.empty(), localReplicas = !ranks.empty(), someRankDiffers = false;
  std::int64_t world = 0, perNode = 0;
  for (const auto& r : ranks) {
    const RankTrace& t = *r.trace;
    world = t.worldSize;
    localRanks = localRanks && r.rank && t.localRank && *r.rank == *t.localRank;
    someRankDiffers = someRankDiffers || (r.rank && *r.rank != t.rank);
    localReplicas = localReplicas && r.numReplicas && t.localWorldSize &&
                    *r.numReplicas == *t.localWorldSize && *t.localWorldSize < t.worldSize;
    if (t.localWorldSize) perNode = *t.localWorldSize;
  }
  localRanks = localRanks && someRankDiffers;
  if (!localRanks && !localReplicas) return std::nullopt;
  if (!localRanks) {
    return Explanation{
        fmt::format("sampler {}'s num_replicas is LOCAL_WORLD_SIZE ({}), the ranks of one node, "
                    "not the world size {}",
                    samplerId, perNode, world),
        "pass num_replicas=dist.get_world_size() (or leave it to DistributedSampler)"};
  }
  // A local rank several ranks share (the first named rank's, else the lowest), and their nodes.
  std::map<std::int64_t, std::vector<const SamplerOnRank*>> byLocal;
  std::optional<std::int64_t> local;
  for (const auto& r : ranks) {
    byLocal[*r.rank].push_back(&r);
    if (!named.empty() && r.trace->rank == named.front()) local = *r.rank;
  }
  if (!local || byLocal[*local].size() < 2) {
    local.reset();
    for (const auto& [l, rs] : byLocal) {
      if (rs.size() >= 2) {
        local = l;
        break;
      }
    }
  }
  if (!local) return std::nullopt;
  std::vector<std::int64_t> same, nodes;
  for (const auto* r : byLocal[*local]) {
    same.push_back(r->trace->rank);
    if (r->trace->node) nodes.push_back(*r->trace->node);
  }
  const std::string where =
      nodes.size() == same.size()
          ? fmt::format("local rank {} on nodes {}", *local, joinAnd(nodes))
          : fmt::format("local rank {} on each of their nodes", *local);
  const std::string what = localReplicas
      ? fmt::format("'s rank is LOCAL_RANK and its num_replicas LOCAL_WORLD_SIZE ({}), not RANK "
                    "and WORLD_SIZE ({})", perNode, world)
      : std::string("'s rank is LOCAL_RANK, not RANK");
  return Explanation{
      fmt::format("sampler {}{}: ranks {} ({}) drew the same samples", samplerId, what,
                  joinAnd(same), where),
      fmt::format("pass rank=dist.get_rank(){} (or leave rank and num_replicas to "
                  "DistributedSampler)",
                  localReplicas ? " and num_replicas=dist.get_world_size()" : "")};
}

std::vector<int> wholeNodesOf(const Trace& trace, const std::vector<std::int64_t>& ranks) {
  const std::set<std::int64_t> chosen(ranks.begin(), ranks.end());
  std::map<int, std::pair<std::size_t, std::size_t>> byNode;  // node -> (ranks, of them chosen)
  for (const auto& t : trace.ranks) {
    if (!t || !t->node) return {};
    auto& [all, in] = byNode[*t->node];
    ++all;
    in += chosen.count(t->rank);
  }
  std::vector<int> nodes;
  for (const auto& [node, counts] : byNode) {
    if (counts.second != 0 && counts.second != counts.first) return {};  // part of a node
    if (counts.second != 0) nodes.push_back(node);
  }
  if (byNode.size() < 2 || nodes.size() == byNode.size()) return {};
  return nodes;
}

std::vector<std::string> ranksPerNode(const Trace& trace) {
  // (node, host name) -> its ranks and their local ranks
  std::map<std::pair<int, std::string>, std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>>
      byNode;
  for (const auto& t : trace.ranks) {
    if (!t || (!t->node && t->hostname.empty())) continue;
    auto& [rs, locals] = byNode[{t->node.value_or(-1), t->hostname}];
    rs.push_back(t->rank);
    if (t->localRank) locals.push_back(*t->localRank);
  }
  if (byNode.size() < 2) return {};  // one node: nothing to tell apart
  constexpr std::size_t kShown = 8;
  std::vector<std::string> lines;
  for (const auto& [key, ranksAndLocals] : byNode) {
    if (lines.size() == kShown) {
      lines.push_back(fmt::format("… ({} nodes in all)", byNode.size()));
      break;
    }
    const auto& [node, host] = key;
    auto [rs, locals] = ranksAndLocals;
    std::sort(locals.begin(), locals.end());
    const std::string name = node >= 0 ? fmt::format("node {}", node) : std::string("host");
    lines.push_back(fmt::format(
        "{}{}: rank{} {}{}", name, host.empty() ? "" : fmt::format(" ({})", host),
        rs.size() == 1 ? "" : "s", ranges(rs),
        locals.size() == rs.size() ? fmt::format(" (local rank{} {})", locals.size() == 1 ? "" : "s",
                                                 ranges(locals))
                                   : ""));
  }
  return lines;
}

}  // namespace ddph::audit
