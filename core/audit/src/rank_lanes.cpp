#include "ddph/audit/rank_lanes.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace ddph::audit {
namespace {

// "all_reduce #29", "barrier #3 on group 1".
std::string collectiveName(const CollectiveRecord& c) {
  return c.group == "0" ? fmt::format("{} #{}", c.op, c.seq) : fmt::format("{} #{} on group {}", c.op, c.seq, c.group);
}

// Failed: the trace says so, or the launcher saw the rank exit with another code than 0 or die of
// a signal it did not send (launch.json's "signaled"; "stopped" and "timed-out" are its own).
report::LaneEnd endOf(const RankTrace& rank, const LaunchedRank* launched) {
  if (rank.errorType || (rank.ended && !rank.endedNormally())) return report::LaneEnd::kFailed;
  if (launched && ((launched->outcome == "exited" && launched->code != 0) || launched->outcome == "signaled")) {
    return report::LaneEnd::kFailed;
  }
  if (rank.ended) return report::LaneEnd::kEnded;
  const CollectiveRecord* last = rank.lastCollective();
  return last && !last->done ? report::LaneEnd::kInCollective : report::LaneEnd::kStopped;
}

}  // namespace

std::optional<report::RankLane> rankLaneOf(const RankTrace& rank,
                                           const std::optional<report::CollectiveDivergence>& divergence,
                                           const LaunchedRank* launched, double startsAt) {
  if (!rank.lastT) return std::nullopt;
  const double end = startsAt + *rank.lastT;
  std::vector<std::pair<double, double>> inside;  // [entered, left) of each collective
  for (const auto& [group, list] : rank.collectives) {
    for (const auto& c : list) {
      if (!c.t || (c.done && !c.doneT)) return std::nullopt;
      const double entered = startsAt + *c.t;
      inside.emplace_back(entered, std::max(entered, c.doneT ? startsAt + *c.doneT : end));
    }
  }
  std::sort(inside.begin(), inside.end());
  report::RankLane lane;
  lane.rank = rank.rank;
  lane.endsAt = end;
  lane.end = endOf(rank, launched);
  double coveredTo = startsAt;
  const auto add = [&lane](double from, double to, report::LaneState state) {
    if (to <= from) return;
    if (!lane.spans.empty() && lane.spans.back().state == state && lane.spans.back().to >= from) {
      lane.spans.back().to = std::max(lane.spans.back().to, to);
    } else {
      lane.spans.push_back({from, to, state});
    }
  };
  for (const auto& [from, to] : inside) {  // the union of the intervals, compute in the gaps
    add(coveredTo, from, report::LaneState::kCompute);
    add(std::max(from, coveredTo), to, report::LaneState::kWait);
    coveredTo = std::max(coveredTo, to);
  }
  add(coveredTo, end, report::LaneState::kCompute);
  if (const CollectiveRecord* last = rank.lastCollective()) {
    lane.lastCollective = collectiveName(*last);
    lane.lastCompleted = last->done;
  }
  if (divergence) {
    const auto list = rank.collectives.find(divergence->group.empty() ? "0" : divergence->group);
    if (list != rank.collectives.end()) {
      for (const auto& c : list->second) {
        if (c.seq == divergence->seq && c.t) lane.divergentAt = startsAt + *c.t;
      }
    }
  }
  return lane;
}

std::vector<report::RankLane> rankLanesOf(const Trace& trace,
                                          const std::optional<report::CollectiveDivergence>& divergence) {
  // One time line when every rank's header has its wall clock: each lane starts when its rank's
  // recorder started, after the earliest.
  std::optional<double> earliest;
  bool clocks = true;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    clocks = clocks && t->startUnix.has_value();
    if (t->startUnix) earliest = std::min(earliest.value_or(*t->startUnix), *t->startUnix);
  }
  std::vector<report::RankLane> lanes;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    const LaunchedRank* launched = nullptr;
    if (trace.launch) {
      for (const auto& l : trace.launch->ranks) {
        if (l.rank == t->rank) launched = &l;
      }
    }
    const double startsAt = clocks && earliest ? *t->startUnix - *earliest : 0.0;
    if (auto lane = rankLaneOf(*t, divergence, launched, startsAt)) lanes.push_back(std::move(*lane));
  }
  return lanes;
}

}  // namespace ddph::audit
