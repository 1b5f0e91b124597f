// check-sampler's minimal counterexample: a rank x position table of the indices each rank drew,
// the indices the violation is about highlighted, and the command that replays it.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "sections.h"

namespace ddph::report::detail {

std::string counterexampleSection(const Counterexample& c) {
  const std::set<std::int64_t> hits(c.highlighted.begin(), c.highlighted.end());
  std::size_t positions = 0;
  for (const auto& r : c.perRank) positions = std::max(positions, r.size());
  constexpr std::size_t kShownPositions = 64;
  std::string table = "<table class=\"counterexample\"><tr><th>rank \\ position</th>";
  for (std::size_t p = 0; p < positions && p < kShownPositions; ++p) table += fmt::format("<th>{}</th>", p);
  if (positions > kShownPositions) table += fmt::format("<th>… {} more</th>", positions - kShownPositions);
  table += "</tr>\n";
  for (std::size_t r = 0; r < c.perRank.size(); ++r) {
    table += r < c.rowLabels.size() ? fmt::format("<tr><th>{}</th>", escape(c.rowLabels[r]))
                                    : fmt::format("<tr><th>rank {}</th>", r);
    for (std::size_t p = 0; p < positions && p < kShownPositions; ++p) {
      if (p >= c.perRank[r].size()) {
        table += "<td></td>";
        continue;
      }
      const std::int64_t i = c.perRank[r][p];
      table += fmt::format("<td class=\"num{}\">{}</td>", hits.count(i) ? " hit" : "", i);
    }
    if (positions > kShownPositions) table += "<td></td>";
    table += "</tr>\n";
  }
  table += "</table>\n";
  std::string body = fmt::format("<p><b>{}</b> fails on <code>{}</code>: {}</p>\n{}", escape(c.property),
                                 escape(c.parameters), escape(c.detail), table);
  if (!hits.empty()) body += "<p class=\"note\">highlighted: the indices the violation is about</p>\n";
  if (!c.replayCommand.empty()) {
    body += fmt::format("<h3>Replay</h3><pre id=\"replay\">{}</pre>\n", escape(c.replayCommand));
  }
  const std::string reading = fmt::format("The smallest case found that breaks {}: {} rows of at most {} indices; {}",
                                          c.property, c.perRank.size(), positions, c.detail);
  return section("counterexample-" + c.property, "Minimal counterexample: " + c.property, reading, body);
}

}  // namespace ddph::report::detail
