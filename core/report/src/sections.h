#pragma once
// The page's pieces, one file each: the skeleton and escaping (html_page.cpp), then one section
// per file. Every section returns a <section> element; a chart is an <svg class="chart"> with a
// one-line reading of it (<p class="reading">) and, where bins aggregate samples or ranks, the
// detail of each bin on hover (its <title>, echoed under the chart by the page's script).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/report/html_report.h"

namespace ddph::report::detail {

/// Text for HTML content and attribute values: & < > " ' escaped.
std::string escape(std::string_view text);

/// "0-3, 7, 9-10" for sorted, distinct values; at most `shown` runs, then "… (N in all)".
std::string rangesText(const std::vector<std::int64_t>& sorted, std::size_t shown = 12);

/// A number with up to 4 significant digits ("0.0123", "1234", "1.2e+06").
std::string shortNumber(double value);

/// <section id=…><h2>heading</h2><p class="reading">reading</p>body</section>; `reading` is text.
std::string section(std::string_view id, std::string_view heading, std::string_view reading,
                    std::string_view body);

/// The whole document around `body`: head, inline style and script, header with title and subtitle.
std::string pageHtml(const Page& page, std::string_view body);

std::string verdictSection(const Verdict& verdict);
/// `verdict`: the section's reading names what the verdict says of the copies it shows.
/// `notDrawn`: one line per loader left out (shown as notes).
std::string coverageSection(const std::vector<CoverageEpoch>& coverage,
                            const std::vector<std::string>& notDrawn, const Verdict& verdict);
std::string timelineSection(const Timeline& timeline);
/// The lanes chart of the Ranks section (rank_lanes_chart.cpp): its reading and figure, "" without lanes.
std::string rankLanesFigure(const Timeline& timeline);
std::string counterexampleSection(const Counterexample& counterexample);
std::string trainingSection(const Training& training);

}  // namespace ddph::report::detail
