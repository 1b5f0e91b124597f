// The rank lanes: a time axis (seconds since the run's start) with a lane per rank, coloured
// compute (between collectives) or wait (inside one), a marker where each rank's trace ends, the
// straggler's lane shaded, the ranks of the first divergent collective outlined and a marker where
// each entered it. At most 400 bins a lane, each coloured by what covers most of it; above 64
// ranks only the lanes worth a look (rank 0, failed, straggler, divergent, behind). Hovering a
// lane or a marker shows its detail.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "sections.h"

namespace ddph::report::detail {
namespace {

constexpr int kBins = 400;
constexpr int kBinPx = 2;
constexpr int kLabel = 64;
constexpr int kAxis = 18;
constexpr int kRight = 12;
constexpr std::size_t kMaxLanes = 64;
constexpr const char* kComputeColour = "#4e79a7";
constexpr const char* kWaitColour = "#b9bec8";

struct Totals {
  double compute = 0, wait = 0;
  double waitShare() const { return compute + wait > 0 ? wait / (compute + wait) : 0; }
};

Totals totalsOf(const RankLane& lane) {
  Totals t;
  for (const auto& s : lane.spans) {
    const double d = std::max(0.0, s.to - s.from);
    if (s.state == LaneState::kCompute) t.compute += d;
    if (s.state == LaneState::kWait) t.wait += d;
  }
  return t;
}

// Each of kBins equal bins of [0, until) takes the state that covers most of it; wait wins a tie,
// and a bin partly known takes what is known (the last bit of a lane is not lost to "nothing").
std::vector<LaneState> binLane(const std::vector<LaneSpan>& spans, double until) {
  std::vector<std::array<double, 2>> cover(kBins, {0, 0});  // [compute, wait]
  const double width = until / kBins;
  for (const auto& s : spans) {
    if (!(s.to > s.from) || s.state == LaneState::kNone) continue;
    const int first = std::clamp(static_cast<int>(std::floor(s.from / width)), 0, kBins - 1);
    const int last = std::clamp(static_cast<int>(std::floor(s.to / width)), 0, kBins - 1);
    for (int b = first; b <= last; ++b) {
      const double overlap = std::min(s.to, (b + 1) * width) - std::max(s.from, b * width);
      if (overlap > 0) cover[static_cast<std::size_t>(b)][s.state == LaneState::kWait ? 1 : 0] += overlap;
    }
  }
  std::vector<LaneState> out(kBins, LaneState::kNone);
  for (std::size_t b = 0; b < out.size(); ++b) {
    const auto& [compute, wait] = cover[b];
    if (compute > 0 || wait > 0) out[b] = wait >= compute ? LaneState::kWait : LaneState::kCompute;
  }
  return out;
}

// One path per state and lane: a horizontal stroke per run of bins in that state.
std::string runsPath(const std::vector<LaneState>& bins, LaneState state, int y, int height,
                     const char* colour) {
  std::string d;
  int pen = -1;
  for (int b = 0; b < kBins;) {
    if (bins[static_cast<std::size_t>(b)] != state) {
      ++b;
      continue;
    }
    int e = b;
    while (e < kBins && bins[static_cast<std::size_t>(e)] == state) ++e;
    const int x = kLabel + b * kBinPx;
    d += pen < 0 ? fmt::format("M{} {}", x, y) : fmt::format("m{} 0", x - pen);
    d += fmt::format("h{}", (e - b) * kBinPx);
    pen = kLabel + e * kBinPx;
    b = e;
  }
  if (d.empty()) return "";
  return fmt::format("<path d=\"{}\" stroke=\"{}\" stroke-width=\"{}\"/>", d, colour, height);
}

const char* endWords(LaneEnd end) {
  switch (end) {
    case LaneEnd::kEnded: return "ended normally";
    case LaneEnd::kFailed: return "failed";
    case LaneEnd::kInCollective: return "stopped";
    case LaneEnd::kStopped: return "stopped without an end";
  }
  return "";
}

const char* endColour(LaneEnd end) {
  switch (end) {
    case LaneEnd::kEnded: return "#2ca02c";
    case LaneEnd::kFailed: return "#d62728";
    case LaneEnd::kInCollective: return "#9467bd";
    case LaneEnd::kStopped: return "#39404f";
  }
  return "#39404f";
}

// "in all_reduce #29, never completed", "after all_reduce #28", "".
std::string whereItEnds(const RankLane& lane) {
  if (lane.lastCollective.empty()) return "";
  return lane.lastCompleted ? fmt::format("after {}", lane.lastCollective)
                            : fmt::format("in {}, never completed", lane.lastCollective);
}

std::string percent(double share) { return fmt::format("{}%", static_cast<long>(std::lround(share * 100))); }

std::string laneTitle(const RankLane& lane, const RankTimeline* row) {
  const Totals t = totalsOf(lane);
  std::string out = fmt::format("rank {}: compute {} s, wait {} s ({} waiting)", lane.rank, shortNumber(t.compute),
                                shortNumber(t.wait), percent(t.waitShare()));
  if (row) out += fmt::format(", {} steps, {} collectives", row->steps, row->collectives);
  const std::string where = whereItEnds(lane);
  out += fmt::format("; {} at {} s{}", endWords(lane.end), shortNumber(lane.endsAt), where.empty() ? "" : " " + where);
  if (row && !row->outcome.empty()) out += fmt::format("; {}", row->outcome);
  if (row && row->straggler) out += "; the straggler";
  return out;
}

// The ranks a person should see when not all fit: rank 0, then the failed, straggling, divergent
// or behind ones, in rank order, at most kMaxLanes.
std::vector<const RankLane*> lanesShown(const Timeline& timeline, const std::map<std::int64_t, const RankTimeline*>& rows,
                                        const std::set<std::int64_t>& divergent) {
  std::vector<const RankLane*> shown;
  std::int64_t maxSteps = 0, maxCollectives = 0;
  for (const auto& r : timeline.ranks) {
    maxSteps = std::max(maxSteps, r.steps);
    maxCollectives = std::max(maxCollectives, r.collectives);
  }
  for (const auto& lane : timeline.lanes) {
    const auto it = rows.find(lane.rank);
    const RankTimeline* row = it == rows.end() ? nullptr : it->second;
    const bool worth = timeline.lanes.size() <= kMaxLanes || lane.rank == 0 || divergent.count(lane.rank) > 0 ||
                       (row && (row->failed || row->straggler || row->steps < maxSteps ||
                                row->collectives < maxCollectives));
    if (worth && shown.size() < kMaxLanes) shown.push_back(&lane);
  }
  return shown;
}

std::string ranksText(std::vector<std::int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", rangesText(ranks, 4));
}

using Rows = std::map<std::int64_t, const RankTimeline*>;

bool laneFailed(const RankLane& l, const Rows& rows) {
  const auto it = rows.find(l.rank);
  return l.end == LaneEnd::kFailed || (it != rows.end() && it->second->failed);
}

// whereItEnds after a space, or "".
std::string whereSuffix(const RankLane& l) {
  const std::string w = whereItEnds(l);
  return w.empty() ? w : " " + w;
}

// How the lanes end: the ranks whose trace ends inside a collective and the collectives they waited
// in, the rank that stopped first (a failed one before one that did not fail), the last end.
struct LaneEnds {
  std::vector<std::int64_t> waiting;
  std::set<std::string> waitedIn;
  const RankLane* stopper = nullptr;
  double until = 0;
};

LaneEnds laneEnds(const std::vector<RankLane>& lanes, const Rows& rows) {
  LaneEnds ends;
  for (const auto& l : lanes) {
    ends.until = std::max(ends.until, l.endsAt);
    if (l.end == LaneEnd::kInCollective) {
      ends.waiting.push_back(l.rank);
      ends.waitedIn.insert(l.lastCollective);
      continue;
    }
    const RankLane* stopper = ends.stopper;
    const bool first = !stopper || (laneFailed(l, rows) && !laneFailed(*stopper, rows)) ||
                       (laneFailed(l, rows) == laneFailed(*stopper, rows) && l.endsAt < stopper->endsAt);
    if (first) ends.stopper = &l;
  }
  return ends;
}

// Every trace ended well, but not every rank took part in the same collectives: say where the
// ranks that differ (or never came) stopped, the first of them by time.
std::string divergenceStop(const std::vector<RankLane>& lanes, const CollectiveDivergence& d, double until) {
  const RankLane* first = nullptr;
  for (const auto& l : lanes) {
    if (std::find(d.ranks.begin(), d.ranks.end(), l.rank) == d.ranks.end()) continue;
    if (!first || l.endsAt < first->endsAt) first = &l;
  }
  std::string stop = fmt::format("all {} ranks ran to their end by {} s, but not through the same collectives: {} "
                                 "{} in {} #{}",
                                 lanes.size(), shortNumber(until), ranksText(d.ranks), d.ranks.size() == 1 ? "differs" : "differ",
                                 d.group.empty() ? "default group" : "group " + d.group, d.seq);
  if (first) stop += fmt::format(" (rank {} ended at {} s{})", first->rank, shortNumber(first->endsAt), whereSuffix(*first));
  return stop;
}

// Who stopped while the others waited; else who failed, where the ranks diverged, or that every
// rank ran to its end.
std::string howTheRunStopped(const Timeline& timeline, const Rows& rows) {
  const auto& lanes = timeline.lanes;
  const LaneEnds ends = laneEnds(lanes, rows);
  const RankLane* stopper = ends.stopper;
  if (!ends.waiting.empty() && stopper) {
    const char* verb = laneFailed(*stopper, rows) ? "failed" : stopper->end == LaneEnd::kEnded ? "ended" : "stopped";
    return fmt::format("rank {} {} at {} s{} while {} waited {}", stopper->rank, verb,
                       shortNumber(stopper->endsAt), whereSuffix(*stopper), ranksText(ends.waiting),
                       ends.waitedIn.size() == 1 && !ends.waitedIn.begin()->empty()
                           ? fmt::format("in {}, which never completed", *ends.waitedIn.begin())
                           : "in collectives that never completed");
  }
  if (!ends.waiting.empty()) {
    return fmt::format("all {} ranks' traces end inside a collective that never completed{}", ends.waiting.size(),
                       ends.waitedIn.size() == 1 && !ends.waitedIn.begin()->empty()
                           ? " (" + *ends.waitedIn.begin() + ")"
                           : "");
  }
  if (stopper && laneFailed(*stopper, rows)) {
    return fmt::format("rank {} failed at {} s{}", stopper->rank, shortNumber(stopper->endsAt), whereSuffix(*stopper));
  }
  if (const auto& d = timeline.firstDivergence; d && !d->ranks.empty()) return divergenceStop(lanes, *d, ends.until);
  return fmt::format("all {} ranks ran to their end by {} s", lanes.size(), shortNumber(ends.until));
}

// "; rank R waited P of its time" for the rank that waited the largest share, and the straggler's.
std::string whoWaited(const std::vector<RankLane>& lanes, const Rows& rows) {
  std::string out;
  const RankLane* waiter = nullptr;
  for (const auto& l : lanes) {
    if (!waiter || totalsOf(l).waitShare() > totalsOf(*waiter).waitShare()) waiter = &l;
  }
  if (waiter && totalsOf(*waiter).wait > 0) {
    out += fmt::format("; rank {} waited {} of its time", waiter->rank, percent(totalsOf(*waiter).waitShare()));
  }
  for (const auto& l : lanes) {
    const auto it = rows.find(l.rank);
    if (it != rows.end() && it->second->straggler) {
      out += fmt::format("; rank {}, the straggler, waited {}", l.rank, percent(totalsOf(l).waitShare()));
      break;
    }
  }
  return out;
}

// Who stopped while the others waited, and who waited most.
std::string lanesReading(const Timeline& timeline, const Rows& rows) {
  std::string stop = howTheRunStopped(timeline, rows) + whoWaited(timeline.lanes, rows);
  stop[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(stop[0])));
  return stop + ".";
}

// Ticks at 1, 2 or 5 times a power of ten, about six on the axis, with a light grid line each.
std::string axis(double until, int top, int bottom) {
  const double raw = until / 6;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / power;
  const double step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * power;
  std::string grid, labels;
  for (int k = 0; k * step <= until * (1 + 1e-9); ++k) {
    const double x = kLabel + k * step / until * kBins * kBinPx;
    grid += fmt::format("M{:.1f} {}V{}", x, top, bottom);
    labels += fmt::format("<text x=\"{:.1f}\" y=\"11\" text-anchor=\"middle\">{} s</text>", x, shortNumber(k * step));
  }
  return fmt::format("<path d=\"{}\" stroke=\"#e3e6ec\"/>{}", grid, labels);
}

// The first divergent collective's ranks (outlined) and its name ("group G #S"), when there is one.
struct Divergent {
  std::set<std::int64_t> ranks;
  std::string name;
};

Divergent divergentOf(const Timeline& timeline) {
  Divergent divergent;
  if (const auto& d = timeline.firstDivergence) {
    divergent.ranks.insert(d->ranks.begin(), d->ranks.end());
    divergent.name = fmt::format("{} #{}", d->group.empty() ? "default group" : "group " + d->group, d->seq);
  }
  return divergent;
}

// The time axis' end: the last lane's end or span, never 0.
double axisEnd(const Timeline& timeline) {
  double until = 1e-9;
  for (const auto& l : timeline.lanes) {
    until = std::max(until, l.endsAt);
    for (const auto& s : l.spans) until = std::max(until, s.to);
  }
  return until;
}

// The figure's size: lanes get thinner above 16 of them, so that the figure stays about as tall.
struct LanesLayout {
  int laneH, pitch, width, height;
  double until;
  double xOf(double t) const { return kLabel + t / until * kBins * kBinPx; }
};

LanesLayout layoutFor(int n, double until) {
  LanesLayout at;
  at.laneH = n <= 16 ? 14 : std::max(4, std::min(14, 448 / n));
  at.pitch = at.laneH + (at.laneH >= 8 ? 3 : 1);
  at.width = kLabel + kBins * kBinPx + kRight;
  at.height = kAxis + n * at.pitch + 2;
  at.until = until;
  return at;
}

// One rank's lane at height y: its hover title, band, label, compute and wait runs, the marker
// where it entered the first divergent collective and the one where its trace ends.
std::string laneSvg(const RankLane& lane, const RankTimeline* row, int y, const LanesLayout& at,
                    const Divergent& divergent) {
  const int laneH = at.laneH;
  const bool straggler = row && row->straggler;
  const bool failed = (row && row->failed) || lane.end == LaneEnd::kFailed;
  std::string svg = fmt::format("<g class=\"lane\"><title>{}</title>", escape(laneTitle(lane, row)));
  // The whole lane hovers; the straggler's is shaded, the divergent ranks' outlined.
  svg += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}/>", y - 1, at.width, laneH + 2,
                     straggler ? "#ffe3c4" : "transparent",
                     divergent.ranks.count(lane.rank) ? " stroke=\"#a11\" stroke-width=\"1.5\"" : "");
  if (laneH >= 8 || lane.rank % 16 == 0) {
    svg += fmt::format("<text x=\"0\" y=\"{}\"{}>rank {}</text>", y + std::min(laneH, 11),
                       failed ? " fill=\"#d62728\" font-weight=\"700\"" : "", lane.rank);
  }
  const auto bins = binLane(lane.spans, at.until);
  const int mid = y + laneH / 2;
  svg += runsPath(bins, LaneState::kCompute, mid, laneH, kComputeColour);
  svg += runsPath(bins, LaneState::kWait, mid, laneH, kWaitColour);
  if (lane.divergentAt) {
    const double x = at.xOf(*lane.divergentAt);
    svg += fmt::format("<path d=\"M{:.1f} {}h8l-4 6z\" fill=\"#a11\"><title>rank {} entered {} (the first "
                       "divergent collective) at {} s</title></path>",
                       x - 4, y - 1, lane.rank, escape(divergent.name), shortNumber(*lane.divergentAt));
  }
  svg += fmt::format("<path d=\"M{:.1f} {}v{}\" stroke=\"{}\" stroke-width=\"3\"><title>rank {} {} at {} s{}</title></path>",
                     at.xOf(lane.endsAt), y - 1, laneH + 2, endColour(lane.end), lane.rank, endWords(lane.end),
                     shortNumber(lane.endsAt), escape(whereSuffix(lane)));
  svg += "</g>\n";
  return svg;
}

// Which lanes the figure shows: all of them, or how many were hidden.
std::string shownLanesCaption(const Timeline& timeline, std::size_t shown) {
  const std::size_t hidden = timeline.lanes.size() - shown;
  return hidden == 0 ? fmt::format("a lane per rank ({})", timeline.lanes.size())
                     : fmt::format("{} of {} ranks' lanes: rank 0 and the failed, straggling, divergent or behind ones; "
                                   "{} hidden",
                                   shown, timeline.lanes.size(), hidden);
}

std::string lanesLegend() {
  return fmt::format(
      "<div class=\"legend\"><span><i style=\"background:{}\"></i>compute</span><span><i style=\"background:{}\"></i>"
      "wait (inside a collective)</span><span><i style=\"background:#2ca02c\"></i>ended</span><span><i "
      "style=\"background:#d62728\"></i>failed</span><span><i style=\"background:#9467bd\"></i>last collective never "
      "completed</span><span><i style=\"background:#39404f\"></i>stops without an end</span><span><i "
      "style=\"background:#a11\"></i>first divergent collective</span></div>\n",
      kComputeColour, kWaitColour);
}

}  // namespace

std::string rankLanesFigure(const Timeline& timeline) {
  if (timeline.lanes.empty()) return "";
  Rows rows;
  for (const auto& r : timeline.ranks) rows.emplace(r.rank, &r);
  const Divergent divergent = divergentOf(timeline);
  const auto shown = lanesShown(timeline, rows, divergent.ranks);
  const int n = static_cast<int>(shown.size());
  const LanesLayout at = layoutFor(n, axisEnd(timeline));
  std::string svg = fmt::format(
      "<svg class=\"chart lanes\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
      "aria-label=\"rank lanes over time\">\n{}\n",
      at.width, at.height, at.width, at.height, axis(at.until, kAxis - 4, at.height));
  for (int i = 0; i < n; ++i) {
    const RankLane& lane = *shown[static_cast<std::size_t>(i)];
    const auto it = rows.find(lane.rank);
    svg += laneSvg(lane, it == rows.end() ? nullptr : it->second, kAxis + i * at.pitch, at, divergent);
  }
  svg += "</svg>\n";
  return fmt::format(
      "<p class=\"reading\">{}</p>\n<figure>{}{}<figcaption>{}; seconds since the run's start; orange band: the "
      "straggler, outlined: the ranks of the first divergent collective; hover a lane or a marker</figcaption>"
      "<div class=\"hover\"></div></figure>\n",
      escape(lanesReading(timeline, rows)), lanesLegend(), svg, escape(shownLanesCaption(timeline, shown.size())));
}

}  // namespace ddph::report::detail
