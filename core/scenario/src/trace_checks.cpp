#include "trace_checks.h"

#include <fmt/format.h>

#include <optional>

#include "ddph/common/error.h"
#include "epoch_schedule.h"
#include "pipeline_hints.h"
#include "rank_sources.h"
#include "step_mismatch.h"

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

// The steps rank `r` planned for `epoch`: its schedule over the batches its passes declared.
std::int64_t plannedSteps(const Scenario& s, const std::vector<const trace::PassRecord*>& passes,
                          std::int64_t epoch) {
  std::vector<std::size_t> counts;
  for (const auto* p : passes)
    counts.push_back(static_cast<std::size_t>(p->declaredBatches.value_or(0)));
  return static_cast<std::int64_t>(epochSchedule(s, counts, epoch).size());
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

  Findings run() {
    for (std::int64_t epoch = 0; epoch < s_.epochs; ++epoch) {
      std::vector<std::vector<const trace::PassRecord*>> passes;
      for (const auto& r : ranks_) {
        auto p = passesOf(r, epoch);
        if (!p) return std::move(out_);  // a rank never began it: the run stopped before
        passes.push_back(std::move(*p));
      }
      if (epoch == 0) explainWithHints(passes.front());
      std::vector<std::int64_t> planned;
      for (const auto& p : passes) planned.push_back(plannedSteps(s_, p, epoch));
      if (auto mismatch = findStepMismatch(s_, epoch, planned, stepsBeforeStop_)) {
        out_.violations.push_back(std::move(*mismatch));  // the ranks stopped in that step
        return std::move(out_);
      }
      if (!everyRankCompleted(ranks_, epoch)) return std::move(out_);
      check(epoch, passes);
    }
    return std::move(out_);
  }

 private:
  int world() const { return static_cast<int>(ranks_.size()); }

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
  Findings out_;
  EpochChecks checks_;
  std::int64_t stepsBeforeStop_ = 0;
};

}  // namespace

Findings checkRunTrace(const Scenario& s, const trace::Trace& trace) {
  std::vector<TracedRank> ranks;
  for (const auto& t : trace.ranks) {
    if (!t) return {};  // a rank that left no trace failed before its first epoch
    ranks.push_back(tracedRank(s, *t));
  }
  if (ranks.empty()) return {};
  return RunTraceChecks(s, std::move(ranks)).run();
}

}  // namespace ddph::scenario
