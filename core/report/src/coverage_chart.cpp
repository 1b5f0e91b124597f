// Coverage: one chart per dataset, one strip per epoch, the samples 0..N-1 from left to right in
// bins (one sample a bin while N is small). A bin's colour is its worst sample: red when a sample
// in it was never consumed, orange when one was consumed twice or more beyond padding, violet when
// the only extra copies are DistributedSampler's padding, green when every sample was consumed
// exactly once. Hovering a bin shows its counts and the ranks that consumed its samples.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "sections.h"

namespace ddph::report::detail {
namespace {

constexpr int kWidth = 960;     // the strips' width in px
constexpr int kLabel = 70;      // the epoch labels' column
constexpr int kStrip = 18;      // a strip's height
constexpr int kGap = 6;
constexpr std::int64_t kMaxBins = 1000;        // per strip
constexpr std::int64_t kMaxCellsPerChart = 20000;  // bins x epochs: keeps a page small

struct Bin {
  std::int64_t first = 0, last = 0;  // samples [first, last]
  std::int64_t never = 0, once = 0, twice = 0, padding = 0, dropped = 0, maxCount = 0;
  std::vector<std::uint64_t> ranks;  // bitset over ranks
};

struct EpochStats {
  std::int64_t n = 0, never = 0, once = 0, twice = 0, padding = 0, dropped = 0, outOfRange = 0,
               consumed = 0;
  std::vector<Bin> bins;
};

// NOTE [Dropped by design] (core/audit/src/audit_page.cpp): when no more samples are unseen than
// drop_last leaves out, the unseen ones are those (which ones the order's tail held is not known
// here, but their number is all that coverage judges).
void markDropped(EpochStats& s, std::int64_t droppedByDesign) {
  if (s.never == 0 || s.never > droppedByDesign) return;
  for (auto& bin : s.bins) {
    bin.dropped = bin.never;
    bin.never = 0;
  }
  s.dropped = s.never;
  s.never = 0;
}

EpochStats analyse(const CoverageEpoch& e, std::int64_t bins) {
  EpochStats s;
  s.n = std::max<std::int64_t>(0, e.datasetSize);
  std::vector<std::uint32_t> count(static_cast<std::size_t>(s.n), 0), pad(static_cast<std::size_t>(s.n), 0);
  std::int64_t world = 1;
  for (const auto& r : e.ranks) world = std::max(world, r.rank + 1);
  const std::size_t words = static_cast<std::size_t>((world + 63) / 64);
  bins = std::max<std::int64_t>(1, std::min(bins, s.n));
  s.bins.resize(static_cast<std::size_t>(s.n == 0 ? 0 : bins));
  for (std::size_t b = 0; b < s.bins.size(); ++b) {
    s.bins[b].first = static_cast<std::int64_t>(b) * s.n / bins;
    s.bins[b].last = static_cast<std::int64_t>(b + 1) * s.n / bins - 1;
    s.bins[b].ranks.assign(words, 0);
  }
  const auto binOf = [&](std::int64_t i) {
    // The bin b with first(b) <= i <= last(b): first(b) = floor(b * n / bins).
    std::int64_t b = (i * bins + bins - 1) / s.n;
    while (b > 0 && s.bins[static_cast<std::size_t>(b)].first > i) --b;
    while (b + 1 < bins && s.bins[static_cast<std::size_t>(b + 1)].first <= i) ++b;
    return static_cast<std::size_t>(b);
  };
  for (const auto& r : e.ranks) {
    for (std::size_t k = 0; k < r.indices.size(); ++k) {
      const std::int64_t i = r.indices[k];
      ++s.consumed;
      if (i < 0 || i >= s.n) {
        ++s.outOfRange;
        continue;
      }
      ++count[static_cast<std::size_t>(i)];
      if (k >= r.paddingFrom) ++pad[static_cast<std::size_t>(i)];
      if (r.rank >= 0) {
        auto& bits = s.bins[binOf(i)].ranks;
        bits[static_cast<std::size_t>(r.rank / 64)] |= std::uint64_t{1} << (r.rank % 64);
      }
    }
  }
  std::size_t b = 0;
  for (std::int64_t i = 0; i < s.n; ++i) {
    while (s.bins[b].last < i) ++b;
    Bin& bin = s.bins[b];
    const std::uint32_t c = count[static_cast<std::size_t>(i)];
    const std::uint32_t extra = c > 0 ? c - 1 : 0;
    const std::uint32_t padExtra = std::min(extra, pad[static_cast<std::size_t>(i)]);
    bin.maxCount = std::max<std::int64_t>(bin.maxCount, c);
    if (c == 0) {
      ++bin.never, ++s.never;
    } else if (extra > padExtra) {
      ++bin.twice, ++s.twice;
    } else if (padExtra > 0) {
      ++bin.padding, ++s.padding;
    } else {
      ++bin.once, ++s.once;
    }
  }
  markDropped(s, e.droppedByDesign);
  return s;
}

const char* colourOf(const Bin& b) {
  if (b.never > 0) return "#d62728";
  if (b.twice > 0) return "#ff7f0e";
  if (b.padding > 0) return "#9467bd";
  if (b.dropped > 0) return "#a0a0a0";
  return "#2ca02c";
}

std::vector<std::int64_t> ranksOf(const Bin& b) {
  std::vector<std::int64_t> out;
  for (std::size_t w = 0; w < b.ranks.size(); ++w) {
    for (int bit = 0; bit < 64; ++bit) {
      if (b.ranks[w] >> bit & 1) out.push_back(static_cast<std::int64_t>(w * 64) + bit);
    }
  }
  return out;
}

std::string binTitle(const CoverageEpoch& e, const Bin& b) {
  const std::vector<std::int64_t> ranks = ranksOf(b);
  const std::string by = ranks.empty() ? "no rank" : fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", rangesText(ranks, 6));
  if (b.first == b.last) {
    const char* what = b.never ? "never consumed" : b.twice ? "consumed twice or more"
                       : b.padding ? "consumed again as a padding copy"
                       : b.dropped ? "left out by drop_last" : "consumed once";
    return fmt::format("epoch {} sample {}: {} ({}x), by {}", e.epoch, b.first, what, b.maxCount, by);
  }
  return fmt::format("epoch {} samples {}-{}: {} once, {} never, {} twice or more, {} padding "
                     "copies, {} left out by drop_last (at most {}x); by {}",
                     e.epoch, b.first, b.last, b.once, b.never, b.twice, b.padding, b.dropped,
                     b.maxCount, by);
}

struct Totals {
  std::int64_t never = 0, twice = 0, padding = 0, dropped = 0;
};

// Fewer bins a strip when there are many epochs, so that bins x epochs stays under the page's cap.
std::int64_t binsPerStrip(std::int64_t rows) {
  std::int64_t bins = kMaxBins;
  if (rows * bins > kMaxCellsPerChart) bins = std::max<std::int64_t>(100, kMaxCellsPerChart / rows);
  return bins;
}

// Each epoch's counts, added to the section's totals.
std::vector<EpochStats> analyseEpochs(const std::vector<const CoverageEpoch*>& epochs,
                                      std::int64_t bins, Totals& totals) {
  std::vector<EpochStats> stats;
  for (const auto* e : epochs) {
    stats.push_back(analyse(*e, bins));
    totals.never += stats.back().never;
    totals.twice += stats.back().twice;
    totals.padding += stats.back().padding;
    totals.dropped += stats.back().dropped;
  }
  return stats;
}

// The strips, one per epoch, and the sample axis under them; `n` becomes the largest dataset size.
std::string coverageStrips(const std::string& name, const std::vector<const CoverageEpoch*>& epochs,
                           const std::vector<EpochStats>& stats, std::int64_t& n) {
  const auto rows = static_cast<std::int64_t>(epochs.size());
  const int height = static_cast<int>(rows) * (kStrip + kGap) + 18;
  std::string svg = fmt::format(
      "<svg class=\"chart coverage\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"coverage of {}\">\n",
      kLabel + kWidth + 4, height, kLabel + kWidth + 4, height, escape(name));
  n = 0;
  for (std::size_t r = 0; r < epochs.size(); ++r) {
    const int y = static_cast<int>(r) * (kStrip + kGap);
    const EpochStats& s = stats[r];
    n = std::max(n, s.n);
    svg += fmt::format("<text x=\"0\" y=\"{}\">epoch {}</text>", y + 13, epochs[r]->epoch);
    const double unit = s.bins.empty() ? 0.0 : static_cast<double>(kWidth) / static_cast<double>(s.bins.size());
    for (std::size_t b = 0; b < s.bins.size(); ++b) {
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
                         kLabel + unit * static_cast<double>(b), y, unit + 0.05, kStrip,
                         colourOf(s.bins[b]), escape(binTitle(*epochs[r], s.bins[b])));
    }
  }
  const int axis = static_cast<int>(rows) * (kStrip + kGap) + 12;
  svg += fmt::format("<text x=\"{}\" y=\"{}\">sample 0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">sample {}</text>",
                     kLabel, axis, kLabel + kWidth, axis, std::max<std::int64_t>(0, n - 1));
  svg += "</svg>\n";
  return svg;
}

// The counts of the first 50 epochs, one row each.
std::string coverageTable(const std::vector<const CoverageEpoch*>& epochs,
                          const std::vector<EpochStats>& stats) {
  std::string table = "<table class=\"coverage-table\"><tr><th>epoch</th><th>samples</th><th>consumed</th>"
                      "<th>once</th><th>never seen</th><th>twice or more</th><th>padding copies</th>"
                      "<th>left out by drop_last</th><th>out of range</th></tr>\n";
  const std::size_t shownRows = 50;
  for (std::size_t r = 0; r < epochs.size() && r < shownRows; ++r) {
    const EpochStats& s = stats[r];
    table += fmt::format("<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                         "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                         "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                         epochs[r]->epoch, s.n, s.consumed, s.once, s.never, s.twice, s.padding, s.dropped,
                         s.outOfRange);
  }
  table += "</table>\n";
  return table;
}

// The reading: the worst epoch, else the clean one.
std::string datasetReading(const std::string& name, const std::vector<const CoverageEpoch*>& epochs,
                           const std::vector<EpochStats>& stats) {
  std::size_t neverEpochs = 0, twiceEpochs = 0, worst = 0;
  for (std::size_t r = 0; r < stats.size(); ++r) {
    if (stats[r].never > 0) ++neverEpochs;
    if (stats[r].twice > 0) ++twiceEpochs;
    if (stats[r].never + stats[r].twice > stats[worst].never + stats[worst].twice) worst = r;
  }
  const EpochStats& w = stats[worst];
  if (neverEpochs + twiceEpochs == 0) {
    std::int64_t padding = 0, dropped = 0;
    for (const auto& s : stats) padding += s.padding, dropped += s.dropped;
    const std::string epochsText = stats.size() == 1 ? fmt::format("epoch {}", epochs.front()->epoch)
                                                     : fmt::format("each of the {} epochs", stats.size());
    const std::string droppedText =
        dropped == 0 ? "" : fmt::format("; {} left out by drop_last, as it promises (grey)", dropped);
    if (padding > 0) {
      return fmt::format("{}: no sample was missed in {}; {} samples were consumed twice as "
                         "DistributedSampler's padding copies (violet){}.",
                         name, epochsText, padding, droppedText);
    }
    return fmt::format("{}: every {}sample was consumed exactly once in {}{}.", name,
                       dropped == 0 ? "" : "kept ", epochsText, droppedText);
  }
  return fmt::format("{}: in epoch {}, {} of {} samples were never consumed (red) and {} were consumed "
                     "twice or more (orange); {} of {} epochs leave samples unseen, {} consume some twice.",
                     name, epochs[worst]->epoch, w.never, w.n, w.twice, neverEpochs, stats.size(), twiceEpochs);
}

constexpr const char* kLegend =
    "<div class=\"legend\"><span><i style=\"background:#2ca02c\"></i>consumed once</span>"
    "<span><i style=\"background:#d62728\"></i>a sample never consumed</span>"
    "<span><i style=\"background:#ff7f0e\"></i>a sample consumed twice or more</span>"
    "<span><i style=\"background:#9467bd\"></i>padding copies only</span>"
    "<span><i style=\"background:#a0a0a0\"></i>left out by drop_last</span></div>\n";

// What a cell is: one sample, or a bin of about n / bins of them.
std::string binningCaption(const std::vector<EpochStats>& stats, std::int64_t n) {
  return stats.empty() || stats.front().bins.empty() || stats.front().bins.front().first == stats.front().bins.front().last
             ? std::string("one cell per sample")
             : fmt::format("{} bins of about {} samples; a bin shows its worst sample", stats.front().bins.size(),
                           (n + static_cast<std::int64_t>(stats.front().bins.size()) - 1) /
                               static_cast<std::int64_t>(stats.front().bins.size()));
}

std::string datasetChart(const std::string& name, const std::vector<const CoverageEpoch*>& epochs,
                         Totals& totals) {
  const std::vector<EpochStats> stats =
      analyseEpochs(epochs, binsPerStrip(static_cast<std::int64_t>(epochs.size())), totals);
  std::int64_t n = 0;
  const std::string svg = coverageStrips(name, epochs, stats, n);
  const std::string table = coverageTable(epochs, stats);
  const std::string reading = datasetReading(name, epochs, stats);
  return fmt::format("<h3>{}</h3><p class=\"reading\">{}</p><figure>{}{}<figcaption>{}; hover a cell for its "
                     "counts and ranks</figcaption><div class=\"hover\"></div></figure>{}",
                     escape(name), escape(reading), kLegend, svg, escape(binningCaption(stats, n)), table);
}

// The section's one line, which must agree with the verdict: padding copies are samples consumed
// twice, which is what no-duplicates fails in an evaluation (and what disjointness allows).
std::string coverageReading(std::size_t epochs, const Totals& t, const Verdict& verdict) {
  const std::string head = "Who consumed which sample, per dataset and epoch: ";
  const bool noDuplicatesFailed = std::any_of(verdict.violations.begin(), verdict.violations.end(),
                                              [](const ViolationRow& v) { return v.property == "no-duplicates"; });
  if (t.never + t.twice > 0) {
    return head + fmt::format("{} sample-epochs never seen, {} consumed twice or more{}.", t.never,
                              t.twice, t.padding == 0 ? "" : fmt::format(" (and {} padding copies)", t.padding));
  }
  const std::string dropped =
      t.dropped == 0 ? "" : fmt::format(" ({} left out by drop_last, as it promises)", t.dropped);
  if (t.padding == 0) {
    return head + fmt::format("no sample was missed or consumed twice in {} dataset epoch{}{}.", epochs,
                              epochs == 1 ? "" : "s", dropped);
  }
  return head + fmt::format("no sample was missed in {} dataset epoch{}; {} were consumed twice as "
                            "DistributedSampler's padding copies (violet){}.",
                            epochs, epochs == 1 ? "" : "s", t.padding,
                            noDuplicatesFailed ? ": the duplicates no-duplicates fails" : "");
}

}  // namespace

std::string coverageSection(const std::vector<CoverageEpoch>& coverage,
                            const std::vector<std::string>& notDrawn, const Verdict& verdict) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const CoverageEpoch*>> byDataset;
  for (const auto& e : coverage) {
    auto& list = byDataset[e.dataset];
    if (list.empty()) order.push_back(e.dataset);
    list.push_back(&e);
  }
  std::string body;
  Totals t;
  for (const auto& name : order) body += datasetChart(name, byDataset[name], t);
  for (const auto& line : notDrawn) body += fmt::format("<p class=\"note\">{}</p>\n", escape(line));
  std::string reading =
      coverage.empty() ? "Who consumed which sample: no chart, since the ranks read different datasets (below)."
                       : coverageReading(coverage.size(), t, verdict);
  if (!coverage.empty() && !notDrawn.empty()) {
    reading.pop_back();
    reading += fmt::format(" of the loaders drawn; {} not drawn (below).", notDrawn.size());
  }
  return section("coverage", "Coverage", reading, body);
}

}  // namespace ddph::report::detail
