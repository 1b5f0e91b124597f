#pragma once
// The data properties on a real run, one family a file (NOTE in data_checks.cpp). The driver,
// checkData (data_checks.cpp), walks each loader's passes and hands every pass, as each rank saw
// it (data_pass.h), to the families below; each family judges its properties, records findings
// and notes in the run's DataFindings, and says whether the checks that build on it may go on.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "data_pass.h"

namespace ddph::audit {

/// What the data checks of one trace share: the trace and its epoch orders, which every check
/// reads, and where they put what they find: findings (one per loader, property and kind,
/// reported at the first epoch it shows, with the number of epochs where it shows), notes, and
/// the properties some loader's pass was judged by.
class DataFindings {
 public:
  DataFindings(const Trace& trace, std::vector<std::string>& notes, std::set<std::string>& judged)
      : trace_(trace), notes_(notes), judged_(judged) {}

  const Trace& trace() const { return trace_; }
  OrderCache& orders() { return orders_; }

  /// A finding about `loader` in one epoch: the first of its (property, `kind`) is kept, the
  /// rest counted. `kind` tells apart findings of one property from different checks.
  void record(std::int64_t loader, const sampler::Violation& v, const std::string& kind = "");
  /// Some loader's pass was judged by `property`.
  void judged(std::string_view property) { judged_.insert(std::string(property)); }
  /// A note of the report, as it is.
  void note(std::string text) { notes_.push_back(std::move(text)); }
  /// "loader 0 (…): why": a property that does not apply to `loader`, said once.
  void notApplicable(std::int64_t loader, const std::string& why);
  /// Whether some finding about `loader` is recorded.
  bool anyFor(std::int64_t loader) const;
  /// The findings, in (loader, property, kind) order, each with the number of its epochs.
  void appendTo(std::vector<sampler::Violation>& out);
  /// The samples of `loader` (of the length of `ranks`' pass) that no training pass of the run
  /// consumed on any of `ranks`, and how many the dataset holds; nothing when some pass's indices
  /// are unknown. Computed once per loader, group of ranks and length: a run property that the
  /// checks of every epoch ask for.
  std::optional<std::pair<std::int64_t, std::int64_t>> neverTrained(std::int64_t loader,
                                                                    const std::vector<RankPass>& ranks);

 private:
  struct Finding {
    sampler::Violation first;
    int epochs = 0;
  };

  const Trace& trace_;
  std::vector<std::string>& notes_;
  std::set<std::string>& judged_;
  OrderCache orders_;
  std::map<std::tuple<std::int64_t, std::string, std::string>, Finding> findings_;
  // (loader, first rank of the group, dataset length) -> neverTrained's answer
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>,
           std::optional<std::pair<std::int64_t, std::int64_t>>>
      neverTrained_;
};

// Each family below takes a pass `k` (its epoch) of `loader` on every rank, `ranks`.

// --- a pass's partition across ranks (data_partition_checks.cpp) --------------------------------

/// valid-range, coverage and disjointness of the ranks' orders in the pass, once the ranks hold
/// one dataset (else the checks of data each rank holds of its own). Returns whether the
/// partition is healthy, so that what builds on it (reshuffle, what was consumed) is judged.
bool checkPartition(DataFindings& findings, std::int64_t loader, std::int64_t k,
                    const std::vector<RankPass>& ranks);

/// NOTE [A loader on some ranks only]: pass `iter` of `loader` ran on some ranks only. Returns
/// whether it was such a pass (judged or noted).
bool checkPassOnSomeRanks(DataFindings& findings, std::int64_t loader, std::int64_t iter);

// --- a sampler of the program's own that draws a subset (data_subset_checks.cpp) ----------------

/// NOTE [A sampler that draws a subset]: when the ranks' recorded orders split, without overlap,
/// fewer than the `n` samples (the `coverage` finding of pass `k`), coverage is judged over the
/// run: the same subset in every epoch is recorded (a cause of its own), a new one each epoch is
/// a note. Returns whether the pass was such a subset (so its per-epoch coverage stands aside).
bool subsetSampler(DataFindings& findings, std::int64_t loader, std::int64_t k, std::int64_t n,
                   const std::vector<RankPass>& ranks, const sampler::Violation& coverage);

// --- why a partition does not split one dataset (data_partition_causes.cpp) ---------------------

/// Why ranks' orders do not split one dataset, from what the samplers say about themselves.
/// `named`: the ranks the finding names (a cause about some ranks names those first); `trace`:
/// the run, for what its launcher knew (launch.json).
Explanation partitionCause(const std::vector<RankPass>& ranks, const std::string& property,
                           const std::vector<std::int64_t>& named, const Trace& trace);

// --- whether every rank's loader holds one dataset (data_one_dataset_checks.cpp) ----------------

/// The ranks hold one dataset: its parts, length, listing and items. Under a sampler that
/// promises to split one dataset, a difference is a coverage finding naming it; under another,
/// a note (each rank's own dataset is by design).
bool sameDataset(DataFindings& findings, std::int64_t loader, std::int64_t k,
                 const std::vector<RankPass>& ranks);

/// The ranks' common dataset length, or nothing (a finding when the sampler promised one
/// dataset).
std::optional<std::int64_t> commonDatasetLen(DataFindings& findings, std::int64_t loader,
                                             std::int64_t k, const std::vector<RankPass>& ranks);

/// NOTE [Ranks that share a dataset of their own]: ranks that each hold their own dataset, where
/// some hold the same one or their Subsets of one base overlap.
void checkSharedOwnData(DataFindings& findings, std::int64_t loader, std::int64_t k,
                        const std::vector<RankPass>& ranks);

// --- samplers that draw with replacement (data_replacement_checks.cpp) --------------------------

/// The ranks' samplers draw with replacement, by their word or by the repeats in their orders:
/// coverage, disjointness and reshuffle do not apply.
bool drawsWithReplacement(const std::vector<RankPass>& ranks, std::int64_t loader, std::int64_t n);

/// The `with-replacement` contract: each rank draws its own indices (ranks-agree).
void checkDrawsDiffer(DataFindings& findings, std::int64_t loader, std::int64_t k, std::int64_t n,
                      const std::vector<RankPass>& ranks);

// --- a new order every epoch (data_reshuffle_checks.cpp) ----------------------------------------

/// reshuffle between two consecutive training passes, `before` and `after`, whose partitions are
/// healthy.
/// NOTE [Loaders made anew each epoch] (docs/audit.md): training loaders over the same samples,
/// one made for each epoch and iterated once, that give every rank the same shuffled order after
/// the same seeds: reshuffle, recorded on the later loader.
void checkRemadeLoaders(DataFindings& findings);

void checkNewOrder(DataFindings& findings, std::int64_t loader, const std::vector<RankPass>& before,
                   const std::vector<RankPass>& after);

// --- what a pass dropped before its end consumed (data_consumed_checks.cpp) ---------------------

/// coverage of what the ranks consumed of a pass that some rank left before its end (zip,
/// break, islice), unless a batch budget or the run's end explains it (a note).
void checkConsumed(DataFindings& findings, std::int64_t loader, std::int64_t k,
                   const std::vector<RankPass>& ranks);

// --- evaluation passes (data_evaluation_checks.cpp) ---------------------------------------------

/// An evaluation pass scores every sample once: coverage and no-duplicates of what the ranks
/// consumed.
void checkEvaluation(DataFindings& findings, std::int64_t loader, std::int64_t k,
                     const std::vector<RankPass>& ranks);

// --- iterable datasets, known by their batches' content (data_stream_checks.cpp) ----------------

/// NOTE [Data with no sampler indices]: disjointness and no-duplicates of the ranks' batches by
/// their content. Returns whether the pass was such a pass (judged here).
bool checkStream(DataFindings& findings, std::int64_t loader, std::int64_t k,
                 const std::vector<RankPass>& ranks);

/// NOTE [A stream whose set_epoch reaches nothing] (docs/audit.md): pass `ranks` of an iterable
/// dataset, which the program gave a new epoch (its set_epoch), streamed on every rank the very
/// batches of `previous` in the same order: reshuffle.
void checkStreamOrder(DataFindings& findings, std::int64_t loader,
                      const std::vector<RankPass>& previous, const std::vector<RankPass>& ranks);

// --- a pass's sampler named in findings (data_sampler_names.cpp) --------------------------------

/// "DistributedSampler", or "its sampler".
std::string samplerClass(const RankPass& rp);

/// "sampler 3 (torch.utils.data.distributed.DistributedSampler)", or "its sampler".
std::string samplerName(const RankPass& rp);

/// What serve_sampler takes for the sampler's class: "train.py:ShardSampler" for a class of the
/// program's script, "package.module:Class" for one it imports.
std::string serveSpec(const RankPass& rp);

}  // namespace ddph::audit
