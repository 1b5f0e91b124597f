#pragma once
// One self-contained HTML page per run (`--html PATH`): the verdict, who consumed which sample,
// where each rank spent its steps and where it stood, a sampler's minimal counterexample, a
// training run's loss and throughput. Inline CSS, SVG and a few lines of JS; the page references
// nothing outside itself, so it opens from a CI artifact or an email (docs/html-report.md).
//
// The input is plain data, not the scenario, audit or trainer types: every command fills a Page
// from what it has (a section it has nothing for is left out) and renders or writes it.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ddph::report {

/// One property the run was judged on.
struct PropertyRow {
  std::string name;     ///< the catalogue's name ("coverage", "collective-mismatch", …)
  std::string summary;  ///< what holds when it holds (may be empty)
  bool applies = true;  ///< false: nothing in the run was judged by it ("n/a", never "ok")
};

/// One violation, as the text report shows it.
struct ViolationRow {
  std::string property;
  std::vector<std::int64_t> ranks;  ///< empty: the whole world
  std::int64_t epoch = -1;          ///< -1: not tied to an epoch
  std::int64_t step = -1;           ///< -1: not tied to a step
  std::string detail;
  std::string likelyCause;  ///< may be empty
  std::vector<std::string> notes;  ///< what follows from it or qualifies it
  std::string help;                ///< the remedy; may be empty
};

struct Verdict {
  bool passed = true;
  std::vector<PropertyRow> properties;  ///< checked; a violated one not listed is added
  std::vector<ViolationRow> violations;
  std::vector<std::string> notes;
};

/// What one rank consumed of one dataset in one epoch, in the order it consumed it.
struct RankConsumption {
  std::int64_t rank = 0;
  std::vector<std::int64_t> indices;
  /// Entries at this position and after are padding copies (PyTorch's DistributedSampler pads
  /// the order's head to make total_size divisible by W); npos: none known.
  std::size_t paddingFrom = std::numeric_limits<std::size_t>::max();
};

/// One dataset in one epoch: the coverage chart's row.
struct CoverageEpoch {
  std::string dataset;
  std::int64_t epoch = 0;
  std::int64_t datasetSize = 0;
  std::vector<RankConsumption> ranks;
  /// Samples DistributedSampler(drop_last=True) leaves out by design (N mod W): when no more are
  /// unseen, the unseen ones are drawn as left out (grey), not as missed (red).
  std::int64_t droppedByDesign = 0;
};

/// One rank's row of the timeline.
struct RankTimeline {
  std::int64_t rank = 0;
  std::int64_t steps = 0;        ///< steps (batches drawn) done
  std::int64_t collectives = 0;  ///< collectives entered
  std::optional<double> computeMs, waitMs;  ///< mean per step, when measured
  std::string stoodAt;  ///< where it was last seen ("epoch 1 batch 4, in allreduce #9, never completed")
  std::string outcome;  ///< how it ended ("exited 0", "killed by signal 9", …)
  bool failed = false;     ///< it ended badly on its own
  bool straggler = false;  ///< the run's straggler
  /// The node it ran on and its local rank there, when the run had more than one node: the chart
  /// groups its rows by node.
  std::optional<std::int64_t> node, localRank;
  std::string host;  ///< the node's host name, or empty
};

/// The first collective that did not match across ranks.
struct CollectiveDivergence {
  std::string group;
  std::int64_t seq = 0;
  std::string detail;  ///< who called what, who never came
  std::vector<std::int64_t> ranks;  ///< the ranks that differ or never came
};

/// What a rank was doing at a moment: the lanes chart's colours.
enum class LaneState : std::uint8_t {
  kNone,     ///< nothing known (before its first line, after its last)
  kCompute,  ///< outside every collective
  kWait,     ///< inside a collective, from entering it to its completion
};

/// One stretch of a rank's time, in seconds since the run's start.
struct LaneSpan {
  double from = 0;
  double to = 0;
  LaneState state = LaneState::kCompute;
};

/// How a rank's trace ends: the marker at the end of its lane.
enum class LaneEnd : std::uint8_t {
  kEnded,         ///< it ended normally (exit code 0)
  kFailed,        ///< it raised, or ended with another code
  kInCollective,  ///< its last collective never completed (hung there, or killed while in it)
  kStopped,       ///< its trace stops elsewhere, without an end (killed, or hung outside collectives)
};

/// One rank's lane of the timeline: its time, coloured compute vs wait, and how it ends. Its flags
/// (failed, straggler, behind) are those of the rank's RankTimeline row, the divergent ranks those
/// of Timeline::firstDivergence.
struct RankLane {
  std::int64_t rank = 0;
  std::vector<LaneSpan> spans;  ///< in time order, not overlapping
  double endsAt = 0;            ///< seconds since the run's start: its last line
  LaneEnd end = LaneEnd::kEnded;
  std::string lastCollective;  ///< the last collective it entered ("all_reduce #29"; may be empty)
  bool lastCompleted = true;   ///< that collective completed
  std::optional<double> divergentAt;  ///< when it entered the first divergent collective
};

struct Timeline {
  std::vector<RankTimeline> ranks;
  std::optional<CollectiveDivergence> firstDivergence;
  std::vector<RankLane> lanes;  ///< a time axis per rank, when the times are known (else empty)
};

/// check-sampler's minimal counterexample.
struct Counterexample {
  std::string property;
  std::string detail;
  std::string parameters;  ///< "N=5 W=2 epoch=1 seed=0 …"
  std::vector<std::vector<std::int64_t>> perRank;  ///< [row][position] -> index
  std::vector<std::string> rowLabels;  ///< one per row ("rank 0, epoch 1"); empty: "rank R"
  std::vector<std::int64_t> highlighted;  ///< indices the violation is about (duplicates, …)
  std::string replayCommand;
};

/// One optimiser step of a training run.
struct TrainingStep {
  std::int64_t epoch = 0;
  std::int64_t step = 0;  ///< global step
  double loss = 0;
  double samplesPerSecond = 0;  ///< 0: not measured
};

/// One dataset's coverage in one training epoch.
struct DatasetEpochSummary {
  std::string dataset;
  std::int64_t epoch = 0;
  std::int64_t size = 0;
  std::int64_t seen = 0;
  std::int64_t neverSeen = 0;
  std::int64_t seenTwice = 0;  ///< consumed twice or more
};

struct Training {
  std::vector<TrainingStep> steps;
  std::vector<DatasetEpochSummary> datasets;
};

/// Everything a page shows.
struct Page {
  std::string title;     ///< "ddp-sim run missing-set-epoch"
  std::string subtitle;  ///< one line: what ran, on how many ranks
  std::string command;   ///< the command line that made it (may be empty)
  Verdict verdict;
  std::vector<CoverageEpoch> coverage;
  /// Why a loader has no coverage chart ("… not drawn: the ranks read different datasets …").
  std::vector<std::string> coverageNotes;
  std::optional<Timeline> timeline;
  std::vector<Counterexample> counterexamples;  ///< one per violated property (check-sampler)
  std::optional<Training> training;
};

/// Throws ConfigError (one line naming `path`) unless the page could be written there now
/// (common::checkWritableFile): commands check before a run, so that a long run does not end in
/// an unwritable path.
void checkReportPath(const std::filesystem::path& path);

/// The page as one HTML document.
std::string renderHtml(const Page& page);

/// Renders `page` and writes it atomically to `path` (ddph/common/atomic_file.h). Throws
/// ConfigError when the folder cannot be written to.
void writeHtmlReport(const std::filesystem::path& path, const Page& page);

}  // namespace ddph::report
