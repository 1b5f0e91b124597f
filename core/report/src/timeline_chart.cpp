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
constexpr int kHeader = 16;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string rowTitle(const RankTimeline& r) {
  std::string t = fmt::format("rank {}: {} steps, {} collectives", r.rank, r.steps, r.collectives);
  if (r.computeMs) t += fmt::format(", compute {} ms", shortNumber(*r.computeMs));
  if (r.waitMs) t += fmt::format(", wait {} ms per step", shortNumber(*r.waitMs));
  if (!r.stoodAt.empty()) t += fmt::format("; last seen {}", r.stoodAt);
  if (!r.outcome.empty()) t += fmt::format("; {}", r.outcome);
  if (r.straggler) t += "; the straggler";
  return t;
}

}  // namespace

std::string timelineSection(const Timeline& timeline) {
  const auto& ranks = timeline.ranks;
  const auto world = static_cast<int>(ranks.size());
  const int rowH = world <= 32 ? 18 : std::max(3, 576 / world);
  const bool labels = rowH >= 12;
  const bool timed = std::any_of(ranks.begin(), ranks.end(),
                                 [](const RankTimeline& r) { return r.computeMs || r.waitMs; });
  std::int64_t maxSteps = 1, maxCollectives = 1;
  double maxMs = 1e-9;
  std::vector<double> compute;
  for (const auto& r : ranks) {
    maxSteps = std::max(maxSteps, r.steps);
    maxCollectives = std::max(maxCollectives, r.collectives);
    maxMs = std::max(maxMs, r.computeMs.value_or(0) + r.waitMs.value_or(0));
    if (r.computeMs) compute.push_back(*r.computeMs);
  }
  std::set<std::int64_t> divergent;
  if (timeline.firstDivergence) divergent.insert(timeline.firstDivergence->ranks.begin(), timeline.firstDivergence->ranks.end());

  const int columns = timed ? 3 : 2;
  const int width = kLabel + columns * (kColumn + kColumnGap);
  const int height = kHeader + world * rowH + 4;
  std::string svg = fmt::format(
      "<svg class=\"chart timeline\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"rank timeline\">\n",
      width, height, width, height);
  const int x1 = kLabel, x2 = kLabel + kColumn + kColumnGap, x3 = kLabel + 2 * (kColumn + kColumnGap);
  svg += fmt::format("<text x=\"{}\" y=\"11\">steps done (max {})</text>", x1, maxSteps);
  svg += fmt::format("<text x=\"{}\" y=\"11\">collectives entered (max {})</text>", x2, maxCollectives);
  if (timed) {
    svg += fmt::format("<text x=\"{}\" y=\"11\">per step: compute (blue) + wait (grey), max {} ms</text>", x3,
                       shortNumber(maxMs));
  }
  const double bar = std::max(1.0, rowH * 0.75);
  for (int i = 0; i < world; ++i) {
    const RankTimeline& r = ranks[static_cast<std::size_t>(i)];
    const int y = kHeader + i * rowH;
    const char* colour = r.failed ? "#d62728" : r.straggler ? "#ff7f0e" : "#4e79a7";
    const bool outlined = divergent.count(r.rank) > 0;
    const std::string stroke = outlined ? " stroke=\"#a11\" stroke-width=\"1.5\"" : "";
    svg += fmt::format("<g class=\"rank\"><title>{}</title>", escape(rowTitle(r)));
    // A row-wide transparent band: the whole row hovers, not only its bars.
    svg += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"transparent\"/>", y,
                       width, rowH);
    if (labels || r.rank % 64 == 0) {
      svg += fmt::format("<text x=\"0\" y=\"{}\">rank {}</text>", y + std::min(rowH, 12), r.rank);
    }
    const double w1 = kColumn * static_cast<double>(r.steps) / static_cast<double>(maxSteps);
    const double w2 = kColumn * static_cast<double>(r.collectives) / static_cast<double>(maxCollectives);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"{}/>", x1, y,
                       std::max(0.5, w1), bar, colour, stroke);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"{}/>", x2, y,
                       std::max(0.5, w2), bar, colour, stroke);
    if (labels) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", x1 + w1 + 4, y + 12, r.steps);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", x2 + w2 + 4, y + 12, r.collectives);
    }
    if (timed) {
      const double c = kColumn * r.computeMs.value_or(0) / maxMs;
      const double w = kColumn * r.waitMs.value_or(0) / maxMs;
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>", x3, y,
                         std::max(0.5, c), bar, r.straggler ? "#ff7f0e" : "#4e79a7");
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#b9bec8\"/>",
                         x3 + c, y, std::max(0.0, w), bar);
    }
    svg += "</g>\n";
  }
  svg += "</svg>\n";

  // The ranks worth a look: failed, straggler, divergent, last seen elsewhere than the majority.
  std::string table = "<table class=\"ranks\"><tr><th>rank</th><th>steps</th><th>collectives</th>";
  if (timed) table += "<th>compute ms/step</th><th>wait ms/step</th>";
  table += "<th>last seen</th><th>how it ended</th></tr>\n";
  std::size_t shown = 0;
  for (const auto& r : ranks) {
    const bool notable = world <= 16 || r.failed || r.straggler || divergent.count(r.rank) > 0 ||
                         r.steps != maxSteps || r.collectives != maxCollectives;
    if (!notable || shown == 64) continue;
    ++shown;
    table += fmt::format("<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>", r.rank,
                         r.steps, r.collectives);
    if (timed) {
      table += fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td>",
                           r.computeMs ? shortNumber(*r.computeMs) : "-", r.waitMs ? shortNumber(*r.waitMs) : "-");
    }
    table += fmt::format("<td>{}</td><td>{}{}</td></tr>\n", escape(r.stoodAt), escape(r.outcome),
                         r.straggler ? " (straggler)" : "");
  }
  table += "</table>\n";
  if (shown == 0) table = fmt::format("<p>All {} ranks did {} steps and entered {} collectives.</p>\n", world, maxSteps, maxCollectives);

  std::string divergence;
  std::string reading;
  if (timeline.firstDivergence) {
    const auto& d = *timeline.firstDivergence;
    divergence = fmt::format("<div class=\"violation\" id=\"first-divergence\"><b>first collective without a partner "
                             "or with different arguments</b>: {} #{} — {}</div>\n",
                             escape(d.group.empty() ? "default group" : "group " + d.group), d.seq, escape(d.detail));
    reading = fmt::format("The ranks parted ways at collective #{} of the {}: {}", d.seq,
                          d.group.empty() ? "default group" : "group " + d.group, d.detail);
  }
  const auto failed = std::find_if(ranks.begin(), ranks.end(), [](const RankTimeline& r) { return r.failed; });
  const auto straggler = std::find_if(ranks.begin(), ranks.end(), [](const RankTimeline& r) { return r.straggler; });
  if (reading.empty() && failed != ranks.end()) {
    reading = fmt::format("Rank {} failed ({}), last seen {}; the others' rows show where they stood.", failed->rank,
                          failed->outcome, failed->stoodAt.empty() ? "before its first step" : failed->stoodAt);
  }
  if (reading.empty() && straggler != ranks.end() && straggler->computeMs) {
    reading = fmt::format("Rank {} is the straggler: {} ms of compute per step against a median of {} ms; the "
                          "others wait for it in every collective.",
                          straggler->rank, shortNumber(*straggler->computeMs), shortNumber(median(compute)));
  }
  if (reading.empty()) {
    std::int64_t minSteps = maxSteps;
    for (const auto& r : ranks) minSteps = std::min(minSteps, r.steps);
    std::vector<std::int64_t> behind;
    for (const auto& r : ranks) {
      if (r.steps == minSteps) behind.push_back(r.rank);
    }
    reading = minSteps == maxSteps
                  ? fmt::format("All {} ranks did {} steps and entered {} collectives{}.", world, maxSteps, maxCollectives,
                                compute.empty() ? ""
                                                : fmt::format("; compute per step {}-{} ms",
                                                              shortNumber(*std::min_element(compute.begin(), compute.end())),
                                                              shortNumber(*std::max_element(compute.begin(), compute.end()))))
                  : fmt::format("Rank{} {} did {} steps where the others did up to {}: the ranks left the loop at "
                                "different steps.",
                                behind.size() == 1 ? "" : "s", rangesText(behind), minSteps, maxSteps);
  }
  const std::string body = fmt::format(
      "{}{}<figure>{}<figcaption>a row per rank; red: failed, orange: straggler, outlined: in the first "
      "divergent collective; hover a row for where it stood</figcaption><div class=\"hover\"></div></figure>{}",
      divergence, rankLanesFigure(timeline), svg, table);
  return section("timeline", "Ranks", reading, body);
}

}  // namespace ddph::report::detail
