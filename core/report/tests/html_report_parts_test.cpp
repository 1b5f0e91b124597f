// ddph::report without a browser: what the page says for exactly known inputs (coverage counts,
// padding copies, bins at large N, the timeline's reading, the counterexample table), escaping,
// and the report path's checks and atomic write. html_report_test.py renders real pages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "ddph/common/error.h"
#include "ddph/report/html_report.h"
#include "test_support.h"

namespace ddph::report {

using common::ConfigError;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The coverage table's row of `epoch`: samples, consumed, once, never, twice+, padding, out of range.
std::string coverageRow(const std::string& html, std::int64_t epoch) {
  const std::regex row("<tr><td class=\"num\">" + std::to_string(epoch) +
                       "</td>((<td class=\"num\">-?[0-9]+</td>){8})</tr>");
  std::smatch m;
  if (!std::regex_search(html, m, row)) return "";
  return std::regex_replace(m[1].str(), std::regex("</?td[^>]*>+"), " ");
}

// torch's DistributedSampler without shuffle: rank r takes r, r + W, … of 0..N-1 padded with its
// head to a multiple of W.
CoverageEpoch stridedEpoch(std::int64_t n, std::int64_t w) {
  CoverageEpoch e;
  e.dataset = "train";
  e.datasetSize = n;
  const std::int64_t perRank = (n + w - 1) / w;
  for (std::int64_t r = 0; r < w; ++r) {
    RankConsumption c;
    c.rank = r;
    for (std::int64_t k = 0; k < perRank; ++k) c.indices.push_back((k * w + r) % n);
    c.paddingFrom = static_cast<std::size_t>(n - r <= 0 ? 0 : (n - r + w - 1) / w);
    e.ranks.push_back(std::move(c));
  }
  return e;
}

TEST(HtmlReportParts, PaddingCopiesAreMarkedNotCountedTwice) {
  Page page;
  page.coverage.push_back(stridedEpoch(10, 4));  // total_size 12: samples 0 and 1 twice, as padding
  const std::string html = renderHtml(page);
  EXPECT_EQ(coverageRow(html, 0), " 10  12  8  0  0  2  0  0 ");
  // Padding copies are samples consumed twice: the readings say so, never "no sample … twice".
  EXPECT_NE(html.find("2 samples were consumed twice as DistributedSampler&#39;s padding copies (violet)"),
            std::string::npos);
  EXPECT_EQ(html.find("no sample was missed or consumed twice"), std::string::npos);
  EXPECT_EQ(count(html, "<rect "), 10u);  // one cell per sample while N is small
}

TEST(HtmlReportParts, NeverSeenAndSeenTwiceAreCountedPerEpoch) {
  Page page;
  CoverageEpoch e;
  e.dataset = "d";
  e.epoch = 3;
  e.datasetSize = 6;
  e.ranks = {{0, {0, 1, 2}}, {1, {2, 3, 7}}};  // 2 twice, 4 and 5 never, 7 out of range
  page.coverage.push_back(e);
  page.verdict.passed = false;
  const std::string html = renderHtml(page);
  EXPECT_EQ(coverageRow(html, 3), " 6  6  3  2  1  0  0  1 ");
  EXPECT_NE(html.find("in epoch 3, 2 of 6 samples were never consumed (red) and 1 were consumed twice"),
            std::string::npos);
  EXPECT_NE(html.find("epoch 3 sample 2: consumed twice or more (2x), by ranks 0-1"), std::string::npos);
}

// DistributedSampler(drop_last=True) leaves N mod W samples out by design: grey, not red, and the
// readings say so; more unseen than that are missed (red).
TEST(HtmlReportParts, SamplesDropLastLeavesOutAreNotMissed) {
  Page page;
  CoverageEpoch e;
  e.dataset = "d";
  e.datasetSize = 10;
  e.droppedByDesign = 2;  // W = 4: 8 kept
  e.ranks = {{0, {0, 4}}, {1, {1, 5}}, {2, {2, 6}}, {3, {3, 7}}};
  page.coverage.push_back(e);
  std::string html = renderHtml(page);
  EXPECT_EQ(coverageRow(html, 0), " 10  8  8  0  0  0  2  0 ");
  EXPECT_EQ(count(html, "#d62728\"><title>"), 0u);
  EXPECT_EQ(count(html, "#a0a0a0\"><title>"), 2u);
  EXPECT_NE(html.find("d: every kept sample was consumed exactly once in epoch 0; 2 left out by "
                      "drop_last, as it promises (grey)."),
            std::string::npos);
  page.coverage.back().ranks.back().indices.pop_back();  // one more unseen: missed
  html = renderHtml(page);
  EXPECT_EQ(count(html, "#d62728\"><title>"), 3u);
}

// The verdict line counts the properties judged: an n/a one held nothing.
TEST(HtmlReportParts, TheVerdictLineDoesNotCountNotApplicableAsHeld) {
  Page page;
  page.verdict.properties = {{"coverage", "", true}, {"reshuffle", "", false}, {"no-duplicates", "", true}};
  page.verdict.violations.push_back({"no-duplicates", {0}, 0, -1, "twice", ""});
  page.verdict.passed = false;
  const std::string html = renderHtml(page);
  EXPECT_NE(html.find("FAILED</span>1 of 2 properties held (1 n/a); 1 violation"), std::string::npos)
      << html.substr(0, 2000);
  page.verdict.violations.clear();
  page.verdict.passed = true;
  EXPECT_NE(renderHtml(page).find("PASSED</span>2 of 2 properties held (1 n/a)</p>"), std::string::npos);
}

TEST(HtmlReportParts, AFindingShowsItsNotesAndHelpUnderItsCause) {
  Page page;
  page.verdict.passed = false;
  page.verdict.violations.push_back({"collective-mismatch", {2}, 1, 3, "no partner", "a skipped step",
                                     {"the same in 2 epochs"}, "decide it on every rank"});
  const std::string html = renderHtml(page);
  const auto cause = html.find("likely cause: a skipped step");
  const auto note = html.find("note: the same in 2 epochs");
  const auto help = html.find("help: decide it on every rank");
  ASSERT_NE(cause, std::string::npos);
  ASSERT_NE(note, std::string::npos);
  ASSERT_NE(help, std::string::npos);
  EXPECT_LT(cause, note);
  EXPECT_LT(note, help);
}

TEST(HtmlReportParts, LargeDatasetsAreBinned) {
  Page page;
  page.coverage.push_back(stridedEpoch(1'000'000, 512));
  page.coverage.back().ranks[5].indices.pop_back();  // rank 5 misses one sample
  const std::string html = renderHtml(page);
  EXPECT_EQ(count(html, "<rect "), 1000u);
  EXPECT_EQ(count(html, "#d62728\"><title>"), 1u);  // the one bin with a missed sample is red
  EXPECT_LT(html.size(), 1'000'000u);
}

TEST(HtmlReportParts, TextIsEscaped) {
  Page page;
  page.title = "<script>alert(1)</script>";
  page.verdict.passed = false;
  page.verdict.violations.push_back({"coverage", {1}, 0, 2, "a & b < c \"d\"", "it's <b>"});
  const std::string html = renderHtml(page);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("a &amp; b &lt; c &quot;d&quot;"), std::string::npos);
  EXPECT_NE(html.find("likely cause: it&#39;s &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(count(html, "<script>"), 1u);  // the page's own
}

TEST(HtmlReportParts, TimelineNamesTheRanksBehindAndTheFirstDivergence) {
  Page page;
  Timeline t;
  for (std::int64_t r = 0; r < 4; ++r) t.ranks.push_back({r, r >= 2 ? 25 : 26, 26, {}, {}, "", "", false, false});
  page.timeline = t;
  EXPECT_NE(renderHtml(page).find("Ranks 2-3 did 25 steps where the others did up to 26"), std::string::npos);
  page.timeline->firstDivergence = CollectiveDivergence{"", 25, "ranks 2, 3 never entered it", {2, 3}};
  EXPECT_NE(renderHtml(page).find("The ranks parted ways at collective #25 of the default group"),
            std::string::npos);
}

TEST(HtmlReportParts, TimelineGroupsTheRanksByNode) {
  // Two nodes of two ranks: a rule and the node's name where each node's rows begin, the node
  // in each row's title and a node column in the ranks' table; none without nodes.
  Page page;
  Timeline t;
  for (std::int64_t r = 0; r < 4; ++r) {
    RankTimeline row{r, 26, 26, {}, {}, "", "", false, false};
    row.node = r / 2;
    row.localRank = r % 2;
    row.host = "node" + std::to_string(r / 2);
    t.ranks.push_back(row);
  }
  page.timeline = t;
  const std::string html = renderHtml(page);
  std::size_t groups = 0;
  for (auto at = html.find("<g class=\"node\">"); at != std::string::npos;
       at = html.find("<g class=\"node\">", at + 1))
    ++groups;
  EXPECT_EQ(groups, 2u);
  EXPECT_NE(html.find(">node 1</text>"), std::string::npos);
  EXPECT_NE(html.find("rank 3 (local rank 1 on node 1, node1): 26 steps"), std::string::npos);
  EXPECT_NE(html.find("<th>rank</th><th>node</th>"), std::string::npos);
  for (auto& row : page.timeline->ranks) row.node.reset();
  EXPECT_EQ(renderHtml(page).find("<g class=\"node\">"), std::string::npos);
}

// Rank 0 computes 1 s then waits 3 s in an allreduce that never completes; rank 1 computes, waits
// 16 ms straddling the 1.00-1.02 s bins, and fails at 3 s. 400 bins of 10 ms over 4 s, 2 px each
// from x = 64: a bin takes what covers most of it (1.00-1.01: 4 ms compute, 6 ms wait: wait).
Timeline twoLanes() {
  Timeline t;
  t.ranks = {{0, 3, 4, {}, {}, "", "", false, false}, {1, 3, 3, {}, {}, "", "", true, false}};
  using S = LaneState;
  t.lanes.push_back({0, {{0, 1, S::kCompute}, {1, 4, S::kWait}}, 4.0, LaneEnd::kInCollective, "all_reduce #3", false, {}});
  t.lanes.push_back({1, {{0, 1.004, S::kCompute}, {1.004, 1.02, S::kWait}, {1.02, 3, S::kCompute}}, 3.0,
                     LaneEnd::kFailed, "all_reduce #2", true, {}});
  return t;
}

TEST(HtmlReportParts, LanesAreBinnedByTheirDominantState) {
  Page page;
  page.timeline = twoLanes();
  const std::string html = renderHtml(page);
  EXPECT_EQ(count(html, "<g class=\"lane\">"), 2u);
  // Lane 0 at y 18 (middle 25), lane 1 at 35 (middle 42), 14 px high: one path per state.
  EXPECT_EQ(count(html, "<path d=\"M64 25h200\" stroke=\"#4e79a7\" stroke-width=\"14\"/>"), 1u) << html;
  EXPECT_EQ(count(html, "<path d=\"M264 25h600\" stroke=\"#b9bec8\" stroke-width=\"14\"/>"), 1u);
  EXPECT_EQ(count(html, "<path d=\"M64 42h200m4 0h396\" stroke=\"#4e79a7\""), 1u);
  EXPECT_EQ(count(html, "<path d=\"M264 42h4\" stroke=\"#b9bec8\""), 1u);
  // End markers: rank 0 stopped at 4 s (x 864) in its allreduce, rank 1 failed at 3 s (x 664).
  EXPECT_NE(html.find("<path d=\"M864.0 17v16\" stroke=\"#9467bd\" stroke-width=\"3\"><title>rank 0 stopped at 4 s in "
                      "all_reduce #3, never completed</title>"),
            std::string::npos);
  EXPECT_NE(html.find("<path d=\"M664.0 34v16\" stroke=\"#d62728\" stroke-width=\"3\"><title>rank 1 failed at 3 s after "
                      "all_reduce #2</title>"),
            std::string::npos);
  EXPECT_NE(html.find("<title>rank 0: compute 1 s, wait 3 s (75% waiting), 3 steps, 4 collectives; stopped at 4 s in "
                      "all_reduce #3, never completed</title>"),
            std::string::npos);
}

TEST(HtmlReportParts, LanesReadWhoStoppedWhileTheOthersWaited) {
  Page page;
  page.timeline = twoLanes();
  EXPECT_NE(renderHtml(page).find("<p class=\"reading\">Rank 1 failed at 3 s after all_reduce #2 while rank 0 waited "
                                  "in all_reduce #3, which never completed; rank 0 waited 75% of its time.</p>"),
            std::string::npos);
  page.timeline->lanes[1].end = LaneEnd::kInCollective;
  page.timeline->lanes[1].lastCollective = "all_reduce #3";
  page.timeline->ranks[1].failed = false;
  EXPECT_NE(renderHtml(page).find("All 2 ranks&#39; traces end inside a collective that never completed (all_reduce "
                                  "#3); rank 0 waited 75% of its time."),
            std::string::npos);
  page.timeline->lanes[0].end = page.timeline->lanes[1].end = LaneEnd::kEnded;
  EXPECT_NE(renderHtml(page).find("All 2 ranks ran to their end by 4 s; rank 0 waited 75% of its time."),
            std::string::npos);
}

// Above 64 ranks only rank 0 and the ranks worth a look get a lane: here the straggler (its lane
// shaded) and a rank behind; the divergent rank 90 is outlined and marked where it entered #5.
TEST(HtmlReportParts, ManyLanesShowOnlyTheRanksWorthALook) {
  Page page;
  Timeline t;
  for (std::int64_t r = 0; r < 100; ++r) {
    t.ranks.push_back({r, r == 80 ? 9 : 10, 10, {}, {}, "", "", false, r == 57});
    const double computed = r == 57 ? 2 : 1;
    t.lanes.push_back({r, {{0, computed, LaneState::kCompute}, {computed, 2, LaneState::kWait}}, 2.0, LaneEnd::kEnded,
                       "all_reduce #9", true, r == 90 ? std::optional<double>(0.5) : std::nullopt});
  }
  t.firstDivergence = CollectiveDivergence{"", 5, "rank 90 called barrier", {90}};
  page.timeline = t;
  const std::string html = renderHtml(page);
  EXPECT_EQ(count(html, "<g class=\"lane\">"), 4u);  // 0, 57, 80, 90
  EXPECT_NE(html.find("4 of 100 ranks&#39; lanes: rank 0 and the failed, straggling, divergent or behind ones; 96 "
                      "hidden"),
            std::string::npos);
  EXPECT_EQ(count(html, "fill=\"#ffe3c4\""), 1u);
  EXPECT_EQ(count(html, "fill=\"transparent\" stroke=\"#a11\""), 1u);
  EXPECT_EQ(count(html, "h8l-4 6z\" fill=\"#a11\"><title>rank 90 entered default group #5 (the first divergent "
                        "collective) at 0.5 s</title>"),
            1u);
  EXPECT_NE(html.find("All 100 ranks ran to their end by 2 s, but not through the same collectives: rank 90 differs "
                      "in default group #5 (rank 90 ended at 2 s after all_reduce #9); rank 0 waited 50% of its "
                      "time; rank 57, the straggler, waited 0%."),
            std::string::npos)
      << html.substr(html.find("<p class=\"reading\">All 100"), 300);
}

TEST(HtmlReportParts, NoLanesWithoutTimes) {
  Page page;
  page.timeline = twoLanes();
  page.timeline->lanes.clear();
  EXPECT_EQ(renderHtml(page).find("chart lanes"), std::string::npos);
}

TEST(HtmlReportParts, CounterexampleTableHighlightsItsIndices) {
  Page page;
  page.counterexamples.push_back(Counterexample{"disjointness", "index 3 on ranks 0 and 1", "N=5 W=2",
                                                {{0, 3, 4}, {3, 1, 2}}, {}, {3}, "ddp-sim check-sampler --replay x"});
  const std::string html = renderHtml(page);
  EXPECT_EQ(count(html, "<td class=\"num hit\">3</td>"), 2u);
  EXPECT_NE(html.find("<pre id=\"replay\">ddp-sim check-sampler --replay x</pre>"), std::string::npos);
}

// The points of the polyline in the chart `name` ("loss", "throughput").
std::size_t chartPoints(const std::string& html, const std::string& name) {
  const auto chart = html.find("<svg class=\"chart " + name + "\"");
  if (chart == std::string::npos) return 0;
  const auto from = html.find("points=\"", chart);
  if (from == std::string::npos) return 0;
  const auto to = html.find('"', from + 8);
  return count(html.substr(from + 8, to - from - 8), ",");
}

TEST(HtmlReportParts, TrainingReadsLossThroughputAndTheMostMissedDataset) {
  Page page;
  Training t;
  const double rates[] = {100, 400, 200, 300, 250};
  for (std::int64_t s = 0; s < 5; ++s) t.steps.push_back({0, s + 1, 2.0 - 0.125 * static_cast<double>(s), rates[s]});
  t.datasets.push_back({"synthetic", 0, 1000, 200, 800, 0});
  t.datasets.push_back({"cifar10", 0, 201, 201, 0, 1});
  page.training = t;
  const std::string html = renderHtml(page);
  EXPECT_NE(html.find("The loss went from 2 at step 1 to 1.5 at step 5."), std::string::npos);
  // sorted 100 200 250 300 400: the median is 250
  EXPECT_NE(html.find("Median 250 samples/s over all ranks (slowest step 100, fastest 400)."), std::string::npos);
  EXPECT_NE(html.find("Most missed: synthetic in epoch 0: 800 of 1000 never seen, 0 seen twice or more."),
            std::string::npos);
  EXPECT_NE(html.find("<title>synthetic epoch 0: 200 seen, 800 never seen, 0 seen twice or more (of 1000)</title>"),
            std::string::npos);
  EXPECT_NE(html.find("<title>cifar10 epoch 0: 201 seen, 0 never seen, 1 seen twice or more (of 201)</title>"),
            std::string::npos);
  // The bars are 700 wide: 200 of 1000 seen is 140, the 800 never seen 560 after it.
  EXPECT_NE(html.find("width=\"140.0\" height=\"15\" fill=\"#2ca02c\"/><rect x=\"330.0\" y=\"2\" width=\"560.0\""),
            std::string::npos);
  EXPECT_EQ(chartPoints(html, "loss"), 5u);
  EXPECT_EQ(chartPoints(html, "throughput"), 5u);
}

TEST(HtmlReportParts, TrainingChartsKeepAtMostAThousandPoints) {
  Page page;
  Training t;
  for (std::int64_t s = 0; s < 2500; ++s) t.steps.push_back({0, s + 1, 1.0, 10.0 + static_cast<double>(s % 7)});
  t.datasets.push_back({"mnist", 0, 100, 100, 0, 0});
  page.training = t;
  const std::string html = renderHtml(page);
  EXPECT_EQ(chartPoints(html, "loss"), 834u);  // every third step: 0, 3, …, 2499
  EXPECT_EQ(chartPoints(html, "throughput"), 834u);
  EXPECT_NE(html.find("Every dataset was seen whole in every epoch."), std::string::npos);
}

TEST(HtmlReportParts, ReportPathIsCheckedAndWrittenAtomically) {
  ddph::test_support::TempDir dir;
  const std::filesystem::path folder = dir.path();
  EXPECT_THROW(checkReportPath(folder / "missing" / "r.html"), ConfigError);
  EXPECT_THROW(checkReportPath(folder), ConfigError);
  const auto path = folder / "r.html";
  { std::ofstream(path) << "old"; }
  Page page;
  page.title = "new";
  writeHtmlReport(path, page);
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_EQ(text.str(), renderHtml(page));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(folder), {}), 1);  // no temp file left
}

}  // namespace
}  // namespace ddph::report
