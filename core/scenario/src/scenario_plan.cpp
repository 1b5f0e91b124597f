#include "scenario_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "ddph/common/error.h"
#include "epoch_checks.h"
#include "epoch_schedule.h"
#include "pipeline_hints.h"
#include "rank_sources.h"
#include "straggler_check.h"

namespace ddph::scenario {

using common::ConfigError;
using sampler::Index;

namespace {

// One rank as its trace shows it: its loaders in the order of the sources it read, and those
// sources (their listings map a batch's positions back to the ids the rank consumed).
struct TracedRank {
  const trace::RankTrace* trace = nullptr;
  RankSources data;
  std::vector<std::int64_t> loaders;  ///< [source]: the loader's id in the trace
};

TracedRank tracedRank(const Scenario& s, const trace::RankTrace& t) {
  TracedRank r{&t, buildRankSources(s, t.rank), {}};
  for (const auto& [id, loader] : t.loaders) r.loaders.push_back(id);
  const std::size_t n = r.data.sources.size();
  if (r.loaders.size() != n) {
    throw ConfigError(fmt::format("{}: {} loaders, but scenario {} reads {} datasets",
                                  t.file.string(), r.loaders.size(), s.name, n));
  }
  for (std::size_t d = 0; d < n; ++d) {
    const std::string& traced = t.loaders.at(r.loaders[d]).dataset;
    if (traced != r.data.sources[d].spec.name) {
      throw ConfigError(fmt::format("{}: loader {} reads {}, but scenario {} reads {} there",
                                    t.file.string(), r.loaders[d], traced, s.name,
                                    r.data.sources[d].spec.name));
    }
  }
  return r;
}

// The rank's passes of `epoch`, one per source, or nothing when it did not begin the epoch.
std::optional<std::vector<const trace::PassRecord*>> passesOf(const TracedRank& r,
                                                              std::int64_t epoch) {
  std::vector<const trace::PassRecord*> passes;
  for (const std::int64_t loader : r.loaders) {
    const trace::PassRecord* p = r.trace->findPass(loader, epoch);
    if (!p) return std::nullopt;
    passes.push_back(p);
  }
  return passes;
}

// Every rank ran `epoch` to its end: each began the next epoch or ended normally (a rank ends
// an epoch only in the step every rank ends it in: NOTE [Step agreement]).
bool everyRankCompleted(const std::vector<TracedRank>& ranks, std::int64_t epoch) {
  for (const auto& r : ranks) {
    if (!passesOf(r, epoch + 1) && !r.trace->endedNormally()) return false;
  }
  return true;
}

// Whether the ranks planned different numbers of steps for `epoch` (their schedules over the
// batches their passes declared): uneven inputs, which the audit judges (collective-mismatch).
bool unevenSteps(const Scenario& s, const std::vector<std::vector<const trace::PassRecord*>>& passes,
                 std::int64_t epoch) {
  std::set<std::size_t> steps;
  for (const auto& rank : passes) {
    std::vector<std::size_t> counts;
    for (const auto* p : rank) counts.push_back(static_cast<std::size_t>(p->declaredBatches.value_or(0)));
    steps.insert(epochSchedule(s, counts, epoch).size());
  }
  return steps.size() > 1;
}

// The ids rank `r` consumed from source `d` in the pass `p`, in the order it consumed them.
std::vector<Index> consumedIds(const TracedRank& r, std::size_t d, const trace::PassRecord& p) {
  const std::vector<Index>& listing = r.data.sources[d].listing;
  std::vector<Index> ids;
  for (const auto& batch : p.batches) {
    if (!batch.indices) {
      throw ConfigError(fmt::format("{}: line {}: a batch of loader {} without its indices",
                                    r.trace->file.string(), batch.line, p.loader));
    }
    for (const Index position : *batch.indices) {
      const bool listed =
          !listing.empty() && position >= 0 && position < static_cast<Index>(listing.size());
      ids.push_back(listed ? listing[static_cast<std::size_t>(position)] : position);
    }
  }
  return ids;
}

class RunTraceChecks {
 public:
  RunTraceChecks(const Scenario& s, std::vector<TracedRank> ranks)
      : s_(s), ranks_(std::move(ranks)), checks_(s, ranks_.front().data.checked, world(), out_) {
    if (s_.resume) stepsBeforeStop_ = stepsBeforeStop(s_, ranks_.front().data.sources.front());
  }

  audit::PlannedRun run() {
    if (s_.resume) planResume();
    for (std::int64_t epoch = 0; epoch < s_.epochs; ++epoch) {
      std::vector<std::vector<const trace::PassRecord*>> passes;
      for (const auto& r : ranks_) {
        auto p = passesOf(r, epoch);
        if (!p) return std::move(out_);  // a rank never began it: the run stopped before
        passes.push_back(std::move(*p));
      }
      if (epoch == 0) explainWithHints(passes.front());
      // An epoch some rank left early or ran in other steps is the audit's to judge (uneven
      // steps, a failure); the stop before a planned resume is the plan's.
      const bool resumed = s_.resume && epoch == 0;
      if (!resumed && unevenSteps(s_, passes, epoch)) return std::move(out_);
      if (!everyRankCompleted(ranks_, epoch)) return std::move(out_);
      check(epoch, passes);
    }
    return std::move(out_);
  }

 private:
  int world() const { return static_cast<int>(ranks_.size()); }

  // [resume]: the ranks beyond the resumed world leave after the steps before the stop, and the
  // resumed epoch is judged by the resume properties (checkResumed), not as one epoch.
  void planResume() {
    audit::PlannedDeparture d;
    for (int r = s_.resume->worldSize; r < world(); ++r) d.ranks.push_back(r);
    d.epoch = 0;
    d.step = stepsBeforeStop_;
    if (!d.ranks.empty()) out_.departure = std::move(d);
    out_.epochsJudgedByPlan.insert(0);
  }

  // What the pipeline's configuration explains, from rank 0's batches per dataset in epoch 0.
  void explainWithHints(const std::vector<const trace::PassRecord*>& rank0) {
    std::vector<DatasetSpec> specs;
    std::vector<std::size_t> counts;
    for (std::size_t d = 0; d < rank0.size(); ++d) {
      specs.push_back(ranks_.front().data.sources[d].spec);
      counts.push_back(static_cast<std::size_t>(rank0[d]->declaredBatches.value_or(0)));
    }
    checks_.explainWith(pipelineHints(s_, specs, counts, world()));
  }

  void check(std::int64_t epoch, const std::vector<std::vector<const trace::PassRecord*>>& passes) {
    std::vector<std::vector<std::vector<Index>>> gathered(passes.front().size());
    for (std::size_t d = 0; d < gathered.size(); ++d) {
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        gathered[d].push_back(consumedIds(ranks_[r], d, *passes[r][d]));
      }
    }
    if (s_.resume && epoch == 0) {
      checks_.checkResumed(epoch, gathered.front(), consumedBeforeStop(*passes.front().front()));
    } else {
      checks_.check(epoch, gathered);
    }
  }

  // [resume]: the samples each rank took before the stop (its first steps' batches; shards are
  // equal, so rank 0's count is every rank's).
  std::int64_t consumedBeforeStop(const trace::PassRecord& rank0) const {
    std::int64_t consumed = 0;
    for (std::size_t b = 0;
         b < rank0.batches.size() && static_cast<std::int64_t>(b) < stepsBeforeStop_; ++b) {
      consumed += rank0.batches[b].size;
    }
    return consumed;
  }

  const Scenario& s_;
  std::vector<TracedRank> ranks_;
  audit::PlannedRun out_;
  EpochChecks checks_;
  std::int64_t stepsBeforeStop_ = 0;
};

}  // namespace

// Every rank ran to its end: their step times compare like with like (a mismatch or a failure
// stops some early, and the audit names that).
bool everyRankEndedNormally(const trace::Trace& trace) {
  return std::all_of(trace.ranks.begin(), trace.ranks.end(),
                     [](const auto& t) { return t && t->endedNormally(); });
}

audit::PlannedRun planOf(const Scenario& s, const trace::Trace& trace) {
  std::vector<TracedRank> ranks;
  for (const auto& t : trace.ranks) {
    if (!t) return {};  // a rank that left no trace failed before its first epoch
    ranks.push_back(tracedRank(s, *t));
  }
  if (ranks.empty()) return {};
  audit::PlannedRun planned = RunTraceChecks(s, std::move(ranks)).run();
  if (everyRankEndedNormally(trace)) {
    if (auto slow = findStragglers(trace)) planned.findings.push_back({std::move(*slow), "", false});
  }
  return planned;
}

}  // namespace ddph::scenario
