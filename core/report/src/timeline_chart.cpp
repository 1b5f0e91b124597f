// The rank timeline: a row per rank with the steps it did, the collectives it entered and, when
// measured, its compute and wait time per step. A rank that failed is red, the straggler orange,
// the ranks of the first collective that had no partner or differed are outlined. Hovering a row
// shows where that rank stood when the run ended (hung, died or finished). Below the chart, a
// table of the ranks worth a look (all of them while W is small).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "sections.h"

namespace ddph::report::detail {
namespace {

constexpr int kLabel = 64;
constexpr int kColumn = 300;  // each bar column
constexpr int kColumnGap = 24;
constexpr int kNodeLabel = 60;  // the nodes' names right of the rows, when the run had nodes
constexpr int kHeader = 16;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// " (local rank 0 on node 1, node1)" when the run had nodes, else empty.
std::string nodeOf(const RankTimeline& r) {
  if (!r.node) return {};
  return fmt::format(" ({}node {}{})",
                     r.localRank ? fmt::format("local rank {} on ", *r.localRank) : std::string(),
                     *r.node, r.host.empty() ? std::string() : ", " + r.host);
}

std::string rowTitle(const RankTimeline& r) {
  std::string t = fmt::format("rank {}{}: {} steps, {} collectives", r.rank, nodeOf(r), r.steps,
                              r.collectives);
  if (r.computeMs) t += fmt::format(", compute {} ms", shortNumber(*r.computeMs));
  if (r.waitMs) t += fmt::format(", wait {} ms per step", shortNumber(*r.waitMs));
  if (!r.stoodAt.empty()) t += fmt::format("; last seen {}", r.stoodAt);
  if (!r.outcome.empty()) t += fmt::format("; {}", r.outcome);
  if (r.straggler) t += "; the straggler";
  return t;
}

// What the chart's rows are measured against: the world, the row height, the longest bars.
struct TimelineScale {
  int world = 0;
  int rowH = 18;
  bool labels = true;  // rows tall enough for text
  bool timed = false;  // some rank measured compute or wait: a third column
  std::int64_t maxSteps = 1, maxCollectives = 1;
  double maxMs = 1e-9;
  std::vector<double> compute;  // ms per step of the ranks that measured it
  std::set<std::int64_t> divergent;  // the ranks of the first divergent collective
  int width = 0;
  int x1 = kLabel, x2 = kLabel + kColumn + kColumnGap, x3 = kLabel + 2 * (kColumn + kColumnGap);
};

TimelineScale scaleOf(const Timeline& timeline) {
  const auto& ranks = timeline.ranks;
  TimelineScale k;
  k.world = static_cast<int>(ranks.size());
  k.rowH = k.world <= 32 ? 18 : std::max(3, 576 / k.world);
  k.labels = k.rowH >= 12;
  k.timed = std::any_of(ranks.begin(), ranks.end(),
                        [](const RankTimeline& r) { return r.computeMs || r.waitMs; });
  for (const auto& r : ranks) {
    k.maxSteps = std::max(k.maxSteps, r.steps);
    k.maxCollectives = std::max(k.maxCollectives, r.collectives);
    k.maxMs = std::max(k.maxMs, r.computeMs.value_or(0) + r.waitMs.value_or(0));
    if (r.computeMs) k.compute.push_back(*r.computeMs);
  }
  if (timeline.firstDivergence) {
    const auto& ranksThatDiffer = timeline.firstDivergence->ranks;
    k.divergent.insert(ranksThatDiffer.begin(), ranksThatDiffer.end());
  }
  const int columns = k.timed ? 3 : 2;
  k.width = kLabel + columns * (kColumn + kColumnGap);
  return k;
}

// Row i of the chart: rank r's steps, collectives and (when timed) compute + wait bars.
std::string rankRow(const RankTimeline& r, int i, const TimelineScale& k) {
  const int y = kHeader + i * k.rowH;
  const double bar = std::max(1.0, k.rowH * 0.75);
  const char* colour = r.failed ? "#d62728" : r.straggler ? "#ff7f0e" : "#4e79a7";
  const bool outlined = k.divergent.count(r.rank) > 0;
  const std::string stroke = outlined ? " stroke=\"#a11\" stroke-width=\"1.5\"" : "";
  std::string svg = fmt::format("<g class=\"rank\"><title>{}</title>", escape(rowTitle(r)));
  // A row-wide transparent band: the whole row hovers, not only its bars.
  svg += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"transparent\"/>", y,
                     k.width, k.rowH);
  if (k.labels || r.rank % 64 == 0) {
    svg += fmt::format("<text x=\"0\" y=\"{}\">rank {}</text>", y + std::min(k.rowH, 12), r.rank);
  }
  const double w1 = kColumn * static_cast<double>(r.steps) / static_cast<double>(k.maxSteps);
  const double w2 =
      kColumn * static_cast<double>(r.collectives) / static_cast<double>(k.maxCollectives);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"{}/>",
                     k.x1, y, std::max(0.5, w1), bar, colour, stroke);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"{}/>",
                     k.x2, y, std::max(0.5, w2), bar, colour, stroke);
  if (k.labels) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", k.x1 + w1 + 4, y + 12, r.steps);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", k.x2 + w2 + 4, y + 12,
                       r.collectives);
  }
  if (k.timed) {
    const double c = kColumn * r.computeMs.value_or(0) / k.maxMs;
    const double w = kColumn * r.waitMs.value_or(0) / k.maxMs;
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>",
                       k.x3, y, std::max(0.5, c), bar, r.straggler ? "#ff7f0e" : "#4e79a7");
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#b9bec8\"/>",
        k.x3 + c, y, std::max(0.0, w), bar);
  }
  return svg + "</g>\n";
}

// The chart: a header over the columns and a row per rank.
std::string timelineSvg(const Timeline& timeline, const TimelineScale& k) {
  const int height = kHeader + k.world * k.rowH + 4;
  const bool nodes = std::any_of(timeline.ranks.begin(), timeline.ranks.end(),
                                 [](const RankTimeline& r) { return r.node.has_value(); });
  const int width = k.width + (nodes ? kNodeLabel : 0);  // the nodes' names right of the rows
  std::string svg = fmt::format(
      "<svg class=\"chart timeline\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"rank timeline\">\n",
      width, height, width, height);
  svg += fmt::format("<text x=\"{}\" y=\"11\">steps done (max {})</text>", k.x1, k.maxSteps);
  svg += fmt::format("<text x=\"{}\" y=\"11\">collectives entered (max {})</text>", k.x2,
                     k.maxCollectives);
  if (k.timed) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"11\">per step: compute (blue) + wait (grey), max {} ms</text>", k.x3,
        shortNumber(k.maxMs));
  }
  for (int i = 0; i < k.world; ++i) {
    const RankTimeline& r = timeline.ranks[static_cast<std::size_t>(i)];
    // Rows grouped by node: a rule and the node's name where a node's ranks begin.
    if (r.node && (i == 0 || timeline.ranks[static_cast<std::size_t>(i - 1)].node != r.node)) {
      const int y = kHeader + i * k.rowH;
      svg += fmt::format("<g class=\"node\"><line x1=\"0\" y1=\"{}\" x2=\"{}\" y2=\"{}\" "
                         "stroke=\"#888\" stroke-dasharray=\"3 2\"/><text x=\"{}\" y=\"{}\">"
                         "node {}</text></g>",
                         y, width, y, k.width + 6, y + std::min(k.rowH, 12), *r.node);
    }
    svg += rankRow(r, i, k);
  }
  return svg + "</svg>\n";
}

// The ranks worth a look: failed, straggler, divergent, behind the others (every rank while
// W <= 16; at most 64 rows).
std::string notableRanksTable(const Timeline& timeline, const TimelineScale& k) {
  const bool nodes = std::any_of(timeline.ranks.begin(), timeline.ranks.end(),
                                 [](const RankTimeline& r) { return r.node.has_value(); });
  std::string table = nodes ? "<table class=\"ranks\"><tr><th>rank</th><th>node</th><th>steps</th>"
                              "<th>collectives</th>"
                            : "<table class=\"ranks\"><tr><th>rank</th><th>steps</th><th>collectives</th>";
  if (k.timed) table += "<th>compute ms/step</th><th>wait ms/step</th>";
  table += "<th>last seen</th><th>how it ended</th></tr>\n";
  std::size_t shown = 0;
  for (const auto& r : timeline.ranks) {
    const bool notable = k.world <= 16 || r.failed || r.straggler ||
                         k.divergent.count(r.rank) > 0 || r.steps != k.maxSteps ||
                         r.collectives != k.maxCollectives;
    if (!notable || shown == 64) continue;
    ++shown;
    table += fmt::format("<tr><td class=\"num\">{}</td>", r.rank);
    if (nodes) {
      table += fmt::format("<td>{}</td>", r.node ? fmt::format("{}{}", *r.node,
                                                               r.localRank ? fmt::format(
                                                                   " (local {})", *r.localRank)
                                                                           : std::string())
                                                 : std::string("-"));
    }
    table += fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td>", r.steps,
                         r.collectives);
    if (k.timed) {
      table += fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td>",
                           r.computeMs ? shortNumber(*r.computeMs) : "-",
                           r.waitMs ? shortNumber(*r.waitMs) : "-");
    }
    table += fmt::format("<td>{}</td><td>{}{}</td></tr>\n", escape(r.stoodAt), escape(r.outcome),
                         r.straggler ? " (straggler)" : "");
  }
  table += "</table>\n";
  if (shown == 0) {
    return fmt::format("<p>All {} ranks did {} steps and entered {} collectives.</p>\n", k.world,
                       k.maxSteps, k.maxCollectives);
  }
  return table;
}

std::string groupName(const std::string& group) {
  return group.empty() ? "default group" : "group " + group;
}

// The banner over the chart naming the first divergent collective, if any.
std::string divergenceBanner(const Timeline& timeline) {
  if (!timeline.firstDivergence) return "";
  const auto& d = *timeline.firstDivergence;
  return fmt::format(
      "<div class=\"violation\" id=\"first-divergence\"><b>first collective without a partner "
      "or with different arguments</b>: {} #{} — {}</div>\n",
      escape(groupName(d.group)), d.seq, escape(d.detail));
}

// The reading when nothing went wrong that names a rank: every rank alike, or some behind.
std::string stepsReading(const Timeline& timeline, const TimelineScale& k) {
  std::int64_t minSteps = k.maxSteps;
  for (const auto& r : timeline.ranks) minSteps = std::min(minSteps, r.steps);
  if (minSteps == k.maxSteps) {
    const std::string compute =
        k.compute.empty()
            ? ""
            : fmt::format("; compute per step {}-{} ms",
                          shortNumber(*std::min_element(k.compute.begin(), k.compute.end())),
                          shortNumber(*std::max_element(k.compute.begin(), k.compute.end())));
    return fmt::format("All {} ranks did {} steps and entered {} collectives{}.", k.world,
                       k.maxSteps, k.maxCollectives, compute);
  }
  std::vector<std::int64_t> behind;
  for (const auto& r : timeline.ranks) {
    if (r.steps == minSteps) behind.push_back(r.rank);
  }
  return fmt::format(
      "Rank{} {} did {} steps where the others did up to {}: the ranks left the loop at "
      "different steps.",
      behind.size() == 1 ? "" : "s", rangesText(behind), minSteps, k.maxSteps);
}

// The section's one-line reading, the first that applies: where the ranks parted ways, the rank
// that failed, the straggler, else how many steps each did.
std::string timelineReading(const Timeline& timeline, const TimelineScale& k) {
  const auto& ranks = timeline.ranks;
  if (timeline.firstDivergence) {
    const auto& d = *timeline.firstDivergence;
    return fmt::format("The ranks parted ways at collective #{} of the {}: {}", d.seq,
                       groupName(d.group), d.detail);
  }
  const auto failed =
      std::find_if(ranks.begin(), ranks.end(), [](const RankTimeline& r) { return r.failed; });
  if (failed != ranks.end()) {
    return fmt::format("Rank {} failed ({}), last seen {}; the others' rows show where they stood.",
                       failed->rank, failed->outcome,
                       failed->stoodAt.empty() ? "before its first step" : failed->stoodAt);
  }
  const auto straggler =
      std::find_if(ranks.begin(), ranks.end(), [](const RankTimeline& r) { return r.straggler; });
  if (straggler != ranks.end() && straggler->computeMs) {
    return fmt::format(
        "Rank {} is the straggler: {} ms of compute per step against a median of {} ms; the "
        "others wait for it in every collective.",
        straggler->rank, shortNumber(*straggler->computeMs), shortNumber(median(k.compute)));
  }
  return stepsReading(timeline, k);
}

}  // namespace

std::string timelineSection(const Timeline& timeline) {
  const TimelineScale scale = scaleOf(timeline);
  const std::string body = fmt::format(
      "{}{}<figure>{}<figcaption>a row per rank; red: failed, orange: straggler, outlined: in the "
      "first divergent collective; hover a row for where it stood</figcaption><div "
      "class=\"hover\"></div></figure>{}",
      divergenceBanner(timeline), rankLanesFigure(timeline), timelineSvg(timeline, scale),
      notableRanksTable(timeline, scale));
  return section("timeline", "Ranks", timelineReading(timeline, scale), body);
}

}  // namespace ddph::report::detail
