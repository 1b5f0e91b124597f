// collective-mismatch of new_group calls. NOTE [new_group is the world's call] (docs/audit.md):
// torch's new_group must be called by every rank of the world, with the same ranks and in the same
// order, the ranks outside the new group too: it names groups by the count of calls and meets at a
// barrier of the whole world. Ranks that ask for different groups at the same call (each rank only
// its own node's group) make different groups under one name and may wait there for good.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// Every group of callers asked for a group that holds them: each rank made only its own group.
bool eachAskedForItsOwn(const std::map<std::string, std::pair<const GroupCall*, std::vector<std::int64_t>>>& by) {
  for (const auto& [key, entry] : by) {
    if (!entry.first) return false;
    for (auto r : entry.second) {
      if (std::find(entry.first->ranks.begin(), entry.first->ranks.end(), r) == entry.first->ranks.end()) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

void checkGroupCalls(const Trace& trace, std::vector<Violation>& out) {
  std::size_t calls = 0;
  for (const auto& t : trace.ranks) {
    if (t) calls = std::max(calls, t->groupCalls.size());
  }
  for (std::size_t i = 0; i < calls; ++i) {
    // key -> (the call, or null for "made no such call"), the ranks
    std::map<std::string, std::pair<const GroupCall*, std::vector<std::int64_t>>> by;
    for (const auto& t : trace.ranks) {
      if (!t) continue;
      if (i < t->groupCalls.size()) {
        const GroupCall& c = t->groupCalls[i];
        auto& entry = by[fmt::format("{}", fmt::join(c.ranks, ","))];
        entry.first = &c;
        entry.second.push_back(t->rank);
      } else {
        if (!t->endedNormally()) return;  // a rank that failed before: its failure's finding
        by["none"].second.push_back(t->rank);
      }
    }
    if (by.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [key, entry] : by) {
      parts.push_back(entry.first ? fmt::format("{} called {}", rankList(entry.second), describeGroupCall(*entry.first))
                                  : fmt::format("{} made no such call", rankList(entry.second)));
    }
    Violation v;
    v.property = std::string(property::kCollectiveMismatch);
    for (const auto& t : trace.ranks) {
      if (t) v.ranks.push_back(t->rank);
    }
    v.detail = fmt::format("the ranks' new_group call {} differs: {}", i + 1, fmt::join(parts, "; "));
    if (eachAskedForItsOwn(by)) {
      v.likelyCause =
          "each rank asked new_group only for the group it belongs to (its node's ranks), but "
          "new_group is a call of the whole world: every rank must make every call, with the same "
          "ranks and in the same order, the ranks outside the group too; the ranks made different "
          "groups under one name and wait for one another at its barrier";
    } else {
      v.likelyCause =
          "new_group is a call of the whole world: every rank must make every call, with the same "
          "ranks and in the same order (the ranks outside the group too), and these ranks did not "
          "(a call under a per-rank condition, or ranks listed per rank)";
    }
    v.help = "create every group on every rank (for ranks in groups: g = dist.new_group(ranks), "
             "keeping the one this rank is in), or use dist.new_subgroups() for per-node groups";
    out.push_back(std::move(v));
    return;
  }
}

}  // namespace ddph::audit
