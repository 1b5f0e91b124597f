// The trace and its audit as the HTML report's data (ddph/audit/audit_page.h).
#include "ddph/audit/audit_page.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "ddph/audit/rank_lanes.h"
#include "ddph/audit/step_times.h"
#include "ddph/report/verdict.h"
#include "audit_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

// NOTE [Padding positions]: torch's DistributedSampler pads its order with the order's head up to
// total_size = ceil(N / W) * W, and rank r takes global positions r, r + W, r + 2W, …; its k-th
// index is a padding copy when k * W + r >= N, i.e. from k = ceil((N - r) / W) on.
std::size_t paddingFrom(const RankTrace& t, const PassRecord& p) {
  const auto loader = t.loaders.find(p.loader);
  if (loader == t.loaders.end()) return report::RankConsumption{}.paddingFrom;
  const auto sampler = t.samplers.find(loader->second.sampler);
  if (sampler == t.samplers.end() || sampler->second.order != OrderKind::kTorchDistributed) {
    return report::RankConsumption{}.paddingFrom;
  }
  const SamplerRecord& s = sampler->second;
  const std::int64_t w = p.numReplicas.value_or(s.numReplicas.value_or(0));
  const std::int64_t r = p.rank.value_or(s.rank.value_or(-1));
  if (w <= 0 || r < 0 || p.dropLast.value_or(s.dropLast.value_or(false))) {
    return report::RankConsumption{}.paddingFrom;
  }
  const std::int64_t rest = p.datasetLen - r;
  return static_cast<std::size_t>(rest <= 0 ? 0 : (rest + w - 1) / w);
}

// NOTE [Dropped by design]: DistributedSampler(drop_last=True) keeps floor(N / W) samples a rank:
// the epoch leaves N mod W samples unseen, which coverage allows. (DataLoader(drop_last=True)
// dropping each rank's last short batch is not by design: coverage fails it, drop-last-confusion.)
std::int64_t droppedByDesign(const RankTrace& t, const PassRecord& p) {
  const SamplerRecord* sampler = samplerOf(t, p.loader);
  if (!sampler || sampler->order != OrderKind::kTorchDistributed) return 0;
  const SamplerRecord& s = *sampler;
  const std::int64_t w = p.numReplicas.value_or(s.numReplicas.value_or(0));
  if (w <= 0 || p.datasetLen <= 0 || !p.dropLast.value_or(s.dropLast.value_or(false))) return 0;
  return p.datasetLen % w;
}

// "rank 3", "ranks 0-510": runs of consecutive ranks joined, so that W = 512 stays one line.
std::string compactRanks(std::vector<std::int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (const auto& [first, last] : consecutiveRuns(ranks)) {
    out += fmt::format("{}{}", out.empty() ? "" : ", ",
                       first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
  }
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", out);
}

std::string outcomeOf(const Trace& trace, const RankTrace* t, int rank) {
  if (trace.launch) {
    for (const auto& l : trace.launch->ranks) {
      if (l.rank != rank) continue;
      if (l.outcome == "exited") return fmt::format("exited with code {}", l.code);
      if (l.outcome == "signaled") return fmt::format("killed by signal {}", l.signal);
      if (l.outcome == "timed-out") return "stopped by the launcher's timeout";
      if (l.outcome == "stopped") return "stopped by the launcher after another rank failed";
      if (l.outcome == "hung-at-exit") return "hung at exit after its work; ended by the launcher";
      return l.outcome;
    }
  }
  if (!t) return "left no trace";
  if (t->ended) return fmt::format("ended normally (code {})", t->endCode);
  if (t->errorType) return fmt::format("raised {}: {}", *t->errorType, t->errorMessage.value_or(""));
  return "its trace stops without an end (killed or hung)";
}

std::string stoodAt(const RankTrace& t) {
  std::string out = whereRankStood(t);
  if (const CollectiveRecord* c = t.lastCollective()) {
    out += fmt::format(", last in {} {}{}", describeCollective(*c), collectiveNumber(*c),
                       c->done ? "" : ", never completed");
  }
  return out;
}

// The traced ranks of group `g` (every rank of the default group "0"), as some rank's trace lists
// the group's members.
std::vector<const RankTrace*> groupMembers(const Trace& trace, const std::string& g) {
  std::vector<const RankTrace*> members;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    bool member = g == "0";
    for (const auto& other : trace.ranks) {
      if (!member && other && other->groups.count(g)) {
        const auto& ranks = other->groups.at(g);
        member = std::find(ranks.begin(), ranks.end(), t->rank) != ranks.end();
      }
    }
    if (member) members.push_back(&*t);
  }
  return members;
}

// Collective number `s` of group `g` when its members did not all enter it with one signature:
// what each called, and the ranks that differ (the absent ones, else every signature but the
// commonest's).
std::optional<report::CollectiveDivergence> divergenceAt(
    const std::vector<const RankTrace*>& members, const std::string& g, std::size_t s) {
  std::map<std::string, std::vector<std::int64_t>> bySignature;
  std::map<std::string, const CollectiveRecord*> example;
  std::vector<std::int64_t> absent;
  for (const auto* t : members) {
    const auto it = t->collectives.find(g);
    if (it == t->collectives.end() || it->second.size() <= s) {
      absent.push_back(t->rank);
      continue;
    }
    const std::string sig = collectiveSignature(it->second[s]);
    bySignature[sig].push_back(t->rank);
    example.emplace(sig, &it->second[s]);
  }
  if (bySignature.size() == 1 && absent.empty()) return std::nullopt;
  report::CollectiveDivergence d;
  d.group = g == "0" ? "" : g;
  d.seq = static_cast<std::int64_t>(s);
  std::string detail;
  // The minority is what differs: the absent ranks, else every signature but the commonest.
  std::size_t commonest = 0;
  for (const auto& [sig, ranks] : bySignature) commonest = std::max(commonest, ranks.size());
  for (const auto& [sig, ranks] : bySignature) {
    detail += fmt::format("{}{} called {}", detail.empty() ? "" : "; ", compactRanks(ranks),
                          describeCollective(*example.at(sig)));
    if (!absent.empty() || ranks.size() < commonest) {
      d.ranks.insert(d.ranks.end(), ranks.begin(), ranks.end());
    }
  }
  if (!absent.empty()) {
    detail += fmt::format("; {} never entered it", compactRanks(absent));
    d.ranks = absent;
  }
  d.detail = detail;
  return d;
}

// The first collective (lowest sequence number, default group first) that the group's traced
// ranks did not all enter with the same signature.
std::optional<report::CollectiveDivergence> firstDivergence(const Trace& trace) {
  std::set<std::string> groups;
  for (const auto& t : trace.ranks) {
    if (t) for (const auto& [g, list] : t->collectives) groups.insert(g);
  }
  std::vector<std::string> ordered(groups.begin(), groups.end());
  std::stable_partition(ordered.begin(), ordered.end(), [](const std::string& g) { return g == "0"; });
  for (const auto& g : ordered) {
    const std::vector<const RankTrace*> members = groupMembers(trace, g);
    std::size_t longest = 0;
    for (const auto* t : members) {
      const auto it = t->collectives.find(g);
      if (it != t->collectives.end()) longest = std::max(longest, it->second.size());
    }
    for (std::size_t s = 0; s < longest; ++s) {
      if (auto d = divergenceAt(members, g, s)) return d;
    }
  }
  return std::nullopt;
}

}  // namespace

const std::vector<std::string_view>& auditedProperties() {
  static const std::vector<std::string_view> kProperties = {
      property::kValidRange,         property::kCoverage,           property::kDisjointness,
      property::kReshuffle,          property::kNoDuplicates,       property::kCollectiveMismatch,
      property::kRankFailure,        property::kReplicaConsistency, property::kParameterUpdates};
  return kProperties;
}

namespace {

// The ranks' loader `loader` reads different datasets (each rank its own Subset or file): its
// indices are positions in each rank's own dataset, not in one, so no chart can merge them.
bool perRankDatasets(const Trace& trace, std::int64_t loader) {
  std::set<std::string> seen;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto l = t->loaders.find(loader);
    if (l != t->loaders.end()) seen.insert(datasetIdentity(l->second));
  }
  return seen.size() > 1;
}

std::string loaderName(const Trace& trace, std::int64_t loader) {
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const auto l = t->loaders.find(loader);
    if (l != t->loaders.end() && !l->second.dataset.empty()) {
      return fmt::format("{} (loader {})", l->second.dataset, loader);
    }
  }
  return fmt::format("loader {}", loader);
}

}  // namespace

std::vector<report::CoverageEpoch> coverageOf(const Trace& trace, std::vector<std::string>* notDrawn) {
  std::vector<report::CoverageEpoch> out;
  std::map<std::int64_t, std::set<std::int64_t>> itersByLoader;
  for (const auto& t : trace.ranks) {
    if (t) for (const auto& p : t->passes) itersByLoader[p.loader].insert(p.iter);
  }
  OrderCache cache;
  for (const auto& [loader, iters] : itersByLoader) {
    if (perRankDatasets(trace, loader)) {
      if (notDrawn) {
        notDrawn->push_back(fmt::format(
            "{}: not drawn: the ranks read different datasets (each its own Subset, shard or "
            "file), so its indices are positions in each rank's own dataset, not in one",
            loaderName(trace, loader)));
      }
      continue;
    }
    for (const auto iter : iters) {
      report::CoverageEpoch e;
      e.epoch = iter;
      bool known = true;
      for (const auto& t : trace.ranks) {
        if (!t) continue;
        const PassRecord* p = t->findPass(loader, iter);
        if (!p) continue;
        const auto consumed = consumedIndices(*t, *p, samplerOrder(*t, *p, cache));
        if (!consumed) {
          known = false;
          break;
        }
        const LoaderRecord& l = t->loaders.at(loader);
        e.dataset = l.dataset.empty() ? fmt::format("loader {}", loader)
                                      : fmt::format("{} (loader {})", l.dataset, loader);
        e.datasetSize = std::max(e.datasetSize, p->datasetLen);
        e.droppedByDesign = std::max(e.droppedByDesign, droppedByDesign(*t, *p));
        e.ranks.push_back({t->rank, *consumed, paddingFrom(*t, *p)});
      }
      if (known && !e.ranks.empty()) out.push_back(std::move(e));
    }
  }
  return out;
}

report::Timeline timelineOf(const Trace& trace, const std::vector<Violation>& violations) {
  // The ranks' nodes, when they ran on more than one (their headers' node).
  std::set<int> nodes;
  for (const auto& t : trace.ranks) {
    if (t && t->node) nodes.insert(*t->node);
  }
  const bool multiNode = nodes.size() > 1;
  std::set<std::int64_t> failed;
  for (const auto& v : violations) {
    if (v.property == property::kRankFailure) failed.insert(v.ranks.begin(), v.ranks.end());
  }
  report::Timeline timeline;
  for (int r = 0; r < trace.worldSize; ++r) {
    const auto& t = trace.ranks[static_cast<std::size_t>(r)];
    report::RankTimeline row;
    row.rank = r;
    if (t) {
      for (const auto& p : t->passes) row.steps += static_cast<std::int64_t>(p.batches.size());
      for (const auto& [g, list] : t->collectives) row.collectives += static_cast<std::int64_t>(list.size());
      row.stoodAt = stoodAt(*t);
      if (multiNode) {
        row.node = t->node;
        if (t->localRank) row.localRank = *t->localRank;
        row.host = t->hostname;
      }
      if (const auto times = stepTimesOf(*t)) {
        row.computeMs = times->computeMs;
        row.waitMs = times->waitMs;
      }
    }
    row.outcome = outcomeOf(trace, t ? &*t : nullptr, r);
    row.failed = failed.count(r) > 0 || !t;
    timeline.ranks.push_back(std::move(row));
  }
  timeline.firstDivergence = firstDivergence(trace);
  timeline.lanes = rankLanesOf(trace, timeline.firstDivergence);
  return timeline;
}

report::Page auditPage(const Trace& trace, const AuditReport& r) {
  report::Page page;
  page.title = fmt::format("ddp-sim audit: {}", r.program.empty() ? r.traceDir : r.program);
  page.subtitle = fmt::format("{} of {} ranks traced; {}{}", r.ranksTraced, r.worldSize,
                              r.passed ? "PASSED" : "FAILED",
                              r.emulated.empty() ? "" : "; emulated: " + r.emulated);
  page.verdict = report::verdictOf(r.passed, r.violations, r.notes, auditedProperties(), r.notApplicable);
  page.coverage = coverageOf(trace, &page.coverageNotes);
  page.timeline = timelineOf(trace, r.violations);
  return page;
}

}  // namespace ddph::audit
