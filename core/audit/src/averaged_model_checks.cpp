// replica-consistency of averaged models (torch.optim.swa_utils.AveragedModel: SWA, EMA): the
// ranks that ran one averaged model ran the same weights, use by use (`averaged_use` lines). An
// averaged model updated on rank 0 only and run on every rank (a sharded evaluation of the SWA
// weights) runs the weights it was built with on the others. A rank-0-only average run on rank 0
// alone, or one every rank updates alike, is never a finding. docs/audit.md, "Averaged models".
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

struct RankUse {
  std::int64_t rank = 0;
  const AveragedModelRecord* model = nullptr;
  const AveragedModelRecord::Use* use = nullptr;
};

// The ranks' k-th uses of the model, where at least two ranks have one and their weights differ;
// empty when they agree at every use.
std::vector<RankUse> firstDisagreement(const Trace& trace, std::int64_t id) {
  for (std::size_t k = 0;; ++k) {
    std::vector<RankUse> at;
    for (int r = 0; r < trace.worldSize; ++r) {
      const auto& t = trace.ranks[static_cast<std::size_t>(r)];
      if (!t) continue;
      const auto m = t->averagedModels.find(id);
      if (m == t->averagedModels.end() || m->second.uses.size() <= k) continue;
      at.push_back({r, &m->second, &m->second.uses[k]});
    }
    if (at.size() < 2) return {};
    for (const auto& u : at) {
      if (u.use->hash != at.front().use->hash) return at;
    }
  }
}

std::string updatesText(std::int64_t n) {
  return n == 0 ? "no update" : fmt::format("{} update{}", n, n == 1 ? "" : "s");
}

Violation averagedFinding(std::int64_t id, const std::vector<RankUse>& uses) {
  std::map<std::string, std::vector<std::int64_t>> byHash;
  std::map<std::string, std::int64_t> updatesOf;
  std::vector<std::int64_t> ranks, neverUpdated, updated;
  std::string updateAt, useAt;
  for (const auto& u : uses) {
    byHash[u.use->hash].push_back(u.rank);
    updatesOf[u.use->hash] = u.use->updates;
    ranks.push_back(u.rank);
    (u.model->updates == 0 ? neverUpdated : updated).push_back(u.rank);
    if (updateAt.empty()) updateAt = u.model->updateAt;
    if (useAt.empty()) useAt = u.use->at;
  }
  std::vector<std::string> groups;
  for (const auto& [hash, rs] : byHash) {
    groups.push_back(fmt::format("{}: {} ({})", rankList(rs), updatesText(updatesOf[hash]),
                                 hash.substr(0, 12)));
  }
  Violation v;
  v.property = std::string(property::kReplicaConsistency);
  v.ranks = ranks;
  v.detail = fmt::format("averaged model {} (AveragedModel) ran with other weights on different "
                         "ranks{}: {}",
                         id, useAt.empty() ? "" : fmt::format(" (at {})", useAt),
                         fmt::join(groups, "; "));
  if (!neverUpdated.empty() && !updated.empty()) {
    v.likelyCause = fmt::format(
        "update_parameters{} ran on {} only, so {} ran the averaged model with the weights it was "
        "built with",
        updateAt.empty() ? "" : fmt::format(" ({})", updateAt), rankList(updated),
        rankList(neverUpdated));
  } else {
    v.likelyCause = fmt::format(
        "the ranks averaged other weights{}: another number of updates, or models that differed "
        "when averaged",
        updateAt.empty() ? "" : fmt::format(" (update_parameters at {})", updateAt));
  }
  v.help = "update the averaged model on every rank (DDP keeps the replicas equal, so every rank "
           "averages the same weights), or run it on rank 0 alone";
  return v;
}

}  // namespace

void checkAveragedModels(const Trace& trace, std::vector<Violation>& out) {
  std::set<std::int64_t> ids;
  for (const auto& t : trace.ranks) {
    if (t) for (const auto& [id, m] : t->averagedModels) ids.insert(id);
  }
  for (auto id : ids) {
    const auto uses = firstDisagreement(trace, id);
    if (!uses.empty()) out.push_back(averagedFinding(id, uses));
  }
}

}  // namespace ddph::audit
