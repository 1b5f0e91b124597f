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

// Who stopped while the others waited, and who waited most.
std::string lanesReading(const Timeline& timeline, const std::map<std::int64_t, const RankTimeline*>& rows) {
  const auto& lanes = timeline.lanes;
  const auto failed = [&rows](const RankLane& l) {
    const auto it = rows.find(l.rank);
    return l.end == LaneEnd::kFailed || (it != rows.end() && it->second->failed);
  };
  std::vector<std::int64_t> waiting;
  std::set<std::string> waitedIn;
  const RankLane* stopper = nullptr;
  double until = 0;
  for (const auto& l : lanes) {
    until = std::max(until, l.endsAt);
    if (l.end == LaneEnd::kInCollective) {
      waiting.push_back(l.rank);
      waitedIn.insert(l.lastCollective);
      continue;
    }
    const bool first = !stopper || (failed(l) && !failed(*stopper)) ||
                       (failed(l) == failed(*stopper) && l.endsAt < stopper->endsAt);
    if (first) stopper = &l;
  }
  std::string stop;
  const auto verb = [&failed](const RankLane& l) {
    return failed(l) ? "failed" : l.end == LaneEnd::kEnded ? "ended" : "stopped";
  };
  const auto where = [](const RankLane& l) {
    const std::string w = whereItEnds(l);
    return w.empty() ? w : " " + w;
  };
  if (!waiting.empty() && stopper) {
    stop = fmt::format("rank {} {} at {} s{} while {} waited {}", stopper->rank, verb(*stopper),
                       shortNumber(stopper->endsAt), where(*stopper), ranksText(waiting),
                       waitedIn.size() == 1 && !waitedIn.begin()->empty()
                           ? fmt::format("in {}, which never completed", *waitedIn.begin())
                           : "in collectives that never completed");
  } else if (!waiting.empty()) {
    stop = fmt::format("all {} ranks' traces end inside a collective that never completed{}", waiting.size(),
                       waitedIn.size() == 1 && !waitedIn.begin()->empty() ? " (" + *waitedIn.begin() + ")" : "");
  } else if (stopper && failed(*stopper)) {
    stop = fmt::format("rank {} failed at {} s{}", stopper->rank, shortNumber(stopper->endsAt), where(*stopper));
  } else if (const auto& d = timeline.firstDivergence; d && !d->ranks.empty()) {
    // Every trace ended well, but not every rank took part in the same collectives: say where the
    // ranks that differ (or never came) stopped, the first of them by time.
    const RankLane* first = nullptr;
    for (const auto& l : lanes) {
      if (std::find(d->ranks.begin(), d->ranks.end(), l.rank) == d->ranks.end()) continue;
      if (!first || l.endsAt < first->endsAt) first = &l;
    }
    stop = fmt::format("all {} ranks ran to their end by {} s, but not through the same collectives: {} "
                       "{} in {} #{}",
                       lanes.size(), shortNumber(until), ranksText(d->ranks), d->ranks.size() == 1 ? "differs" : "differ",
                       d->group.empty() ? "default group" : "group " + d->group, d->seq);
    if (first) stop += fmt::format(" (rank {} ended at {} s{})", first->rank, shortNumber(first->endsAt), where(*first));
  } else {
    stop = fmt::format("all {} ranks ran to their end by {} s", lanes.size(), shortNumber(until));
  }
  const RankLane* waiter = nullptr;
  for (const auto& l : lanes) {
    if (!waiter || totalsOf(l).waitShare() > totalsOf(*waiter).waitShare()) waiter = &l;
  }
  if (waiter && totalsOf(*waiter).wait > 0) {
    stop += fmt::format("; rank {} waited {} of its time", waiter->rank, percent(totalsOf(*waiter).waitShare()));
  }
  for (const auto& l : lanes) {
    const auto it = rows.find(l.rank);
    if (it != rows.end() && it->second->straggler) {
      stop += fmt::format("; rank {}, the straggler, waited {}", l.rank, percent(totalsOf(l).waitShare()));
      break;
    }
  }
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

}  // namespace

std::string rankLanesFigure(const Timeline& timeline) {
  if (timeline.lanes.empty()) return "";
  std::map<std::int64_t, const RankTimeline*> rows;
  for (const auto& r : timeline.ranks) rows.emplace(r.rank, &r);
  std::set<std::int64_t> divergent;
  std::string divergentName;
  if (const auto& d = timeline.firstDivergence) {
    divergent.insert(d->ranks.begin(), d->ranks.end());
    divergentName = fmt::format("{} #{}", d->group.empty() ? "default group" : "group " + d->group, d->seq);
  }
  double until = 1e-9;
  for (const auto& l : timeline.lanes) {
    until = std::max(until, l.endsAt);
    for (const auto& s : l.spans) until = std::max(until, s.to);
  }
  const auto shown = lanesShown(timeline, rows, divergent);
  const int n = static_cast<int>(shown.size());
  const int laneH = n <= 16 ? 14 : std::max(4, std::min(14, 448 / n));
  const int pitch = laneH + (laneH >= 8 ? 3 : 1);
  const int width = kLabel + kBins * kBinPx + kRight;
  const int height = kAxis + n * pitch + 2;
  const auto xOf = [until](double t) { return kLabel + t / until * kBins * kBinPx; };
  std::string svg = fmt::format(
      "<svg class=\"chart lanes\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
      "aria-label=\"rank lanes over time\">\n{}\n",
      width, height, width, height, axis(until, kAxis - 4, height));
  for (int i = 0; i < n; ++i) {
    const RankLane& lane = *shown[static_cast<std::size_t>(i)];
    const auto it = rows.find(lane.rank);
    const RankTimeline* row = it == rows.end() ? nullptr : it->second;
    const int y = kAxis + i * pitch;
    const bool straggler = row && row->straggler;
    const bool failed = (row && row->failed) || lane.end == LaneEnd::kFailed;
    svg += fmt::format("<g class=\"lane\"><title>{}</title>", escape(laneTitle(lane, row)));
    // The whole lane hovers; the straggler's is shaded, the divergent ranks' outlined.
    svg += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}/>", y - 1, width, laneH + 2,
                       straggler ? "#ffe3c4" : "transparent",
                       divergent.count(lane.rank) ? " stroke=\"#a11\" stroke-width=\"1.5\"" : "");
    if (laneH >= 8 || lane.rank % 16 == 0) {
      svg += fmt::format("<text x=\"0\" y=\"{}\"{}>rank {}</text>", y + std::min(laneH, 11),
                         failed ? " fill=\"#d62728\" font-weight=\"700\"" : "", lane.rank);
    }
    const auto bins = binLane(lane.spans, until);
    const int mid = y + laneH / 2;
    svg += runsPath(bins, LaneState::kCompute, mid, laneH, kComputeColour);
    svg += runsPath(bins, LaneState::kWait, mid, laneH, kWaitColour);
    if (lane.divergentAt) {
      const double x = xOf(*lane.divergentAt);
      svg += fmt::format("<path d=\"M{:.1f} {}h8l-4 6z\" fill=\"#a11\"><title>rank {} entered {} (the first "
                         "divergent collective) at {} s</title></path>",
                         x - 4, y - 1, lane.rank, escape(divergentName), shortNumber(*lane.divergentAt));
    }
    const std::string where = whereItEnds(lane);
    svg += fmt::format("<path d=\"M{:.1f} {}v{}\" stroke=\"{}\" stroke-width=\"3\"><title>rank {} {} at {} s{}</title></path>",
                       xOf(lane.endsAt), y - 1, laneH + 2, endColour(lane.end), lane.rank, endWords(lane.end),
                       shortNumber(lane.endsAt), escape(where.empty() ? where : " " + where));
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  const std::size_t hidden = timeline.lanes.size() - shown.size();
  const std::string which =
      hidden == 0 ? fmt::format("a lane per rank ({})", timeline.lanes.size())
                  : fmt::format("{} of {} ranks' lanes: rank 0 and the failed, straggling, divergent or behind ones; "
                                "{} hidden",
                                shown.size(), timeline.lanes.size(), hidden);
  const std::string legend = fmt::format(
      "<div class=\"legend\"><span><i style=\"background:{}\"></i>compute</span><span><i style=\"background:{}\"></i>"
      "wait (inside a collective)</span><span><i style=\"background:#2ca02c\"></i>ended</span><span><i "
      "style=\"background:#d62728\"></i>failed</span><span><i style=\"background:#9467bd\"></i>last collective never "
      "completed</span><span><i style=\"background:#39404f\"></i>stops without an end</span><span><i "
      "style=\"background:#a11\"></i>first divergent collective</span></div>\n",
      kComputeColour, kWaitColour);
  return fmt::format(
      "<p class=\"reading\">{}</p>\n<figure>{}{}<figcaption>{}; seconds since the run's start; orange band: the "
      "straggler, outlined: the ranks of the first divergent collective; hover a lane or a marker</figcaption>"
      "<div class=\"hover\"></div></figure>\n",
      escape(lanesReading(timeline, rows)), legend, svg, escape(which));
}

}  // namespace ddph::report::detail
