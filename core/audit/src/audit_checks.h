#pragma once
// The checks behind auditTrace, one family a file. Each appends what it finds; none throws for
// what a trace says.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ddph/audit/audit.h"
#include "ddph/audit/planned_run.h"
#include "ddph/audit/trace_records.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/property.h"

namespace ddph::audit {

/// Why a finding happened and its remedy: the finding's likely cause and its help.
struct Explanation {
  std::string cause;
  std::string help;
  bool empty() const { return cause.empty(); }
};

/// Sets `v`'s likely cause and help from `e` (describe.cpp).
void explain(sampler::Violation& v, Explanation e);

/// rank_checks.cpp: rank-failure (no trace, crashed, killed, hung, raised); `notes` gets the
/// ranks that hung at exit after their work (NOTE [Hung at exit]: not a finding).
void checkRanks(const Trace& trace, std::vector<sampler::Violation>& out,
                std::vector<std::string>& notes);

/// collective_checks.cpp: collective-mismatch (uneven steps, desynchronised collectives).
void checkCollectives(const Trace& trace, std::vector<sampler::Violation>& out);

/// unreduced_buckets.cpp: collective-mismatch of a DDP backward whose gradient buckets some ranks
/// never reduced, their next forward raising DDP's unfinished-reduction error (NOTE [A backward
/// some ranks never reduced]), or nothing.
std::optional<sampler::Violation> bucketsNeverReduced(const Trace& trace);

/// group_call_checks.cpp: collective-mismatch of new_group calls that differ across the ranks
/// (NOTE [new_group is the world's call]).
void checkGroupCalls(const Trace& trace, std::vector<sampler::Violation>& out);

/// data_checks.cpp (one family of data checks a file, data_checks.h): the samplers' partitions
/// (coverage, disjointness, reshuffle), what was consumed (coverage), evaluation duplicates
/// (no-duplicates).
/// `judged` gets the name of every property some loader's pass was judged by.
void checkData(const Trace& trace, std::vector<sampler::Violation>& out,
               std::vector<std::string>& notes, std::set<std::string>& judged);

/// replica_checks.cpp: replica-consistency and parameter-updates.
void checkReplicas(const Trace& trace, std::vector<sampler::Violation>& out);

/// averaged_model_checks.cpp: replica-consistency of averaged models (SWA, EMA): the ranks that
/// ran one ran the same weights, use by use.
void checkAveragedModels(const Trace& trace, std::vector<sampler::Violation>& out);

/// planned_run.cpp: what a planned run's caller knows, applied to the audit's own findings
/// (NOTE [One judge]).
void applyPlan(const PlannedRun& plan, AuditReport& report);

// --- what each rank's sampler yields and what it consumed (data_pass.cpp) -----------------------

// The epoch orders of torch's DistributedSampler, built once per (N, seed, epoch, shuffle).
class OrderCache {
 public:
  const std::vector<sampler::Index>& order(std::int64_t n, std::int64_t seed, std::int64_t epoch,
                                          bool shuffle) {
    auto key = std::make_tuple(n, seed, epoch, shuffle);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    sampler::DistributedSamplerOptions options;
    options.shuffle = shuffle;
    return cache_.emplace(key, sampler::distributedEpochOrder(n, seed, epoch, options))
        .first->second;
  }

 private:
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>, std::vector<sampler::Index>>
      cache_;
};

/// The sampler `loader` draws from on rank `t`, or nullptr (an iterable dataset's loader).
const SamplerRecord* samplerOf(const RankTrace& t, std::int64_t loader);

/// Everything the sampler of pass `p` yields on rank `t`, when it is known: torch's
/// DistributedSampler recomputed, SequentialSampler, or a recorded pass that ran to its end.
std::optional<std::vector<sampler::Index>> samplerOrder(const RankTrace& t, const PassRecord& p,
                                                       OrderCache& cache);

/// A pass that ran to StopIteration, or handed out len(loader) batches (NOTE [Passes and epochs]).
bool completePass(const PassRecord& p);

/// A pass that trained: some batch was handed out with gradients on.
bool trainsOnBatches(const PassRecord& p);

/// `p` is the loader's last pass on rank `t`, after which the program trained on nothing else:
/// the job ended inside that epoch (NOTE [A run that ends inside a pass]).
bool runEndsInside(const RankTrace& t, const PassRecord& p);

/// The indices of the batches of `p` the program used (zip's discarded last batch left out), or
/// nothing when they are unknown.
std::optional<std::vector<sampler::Index>> consumedIndices(
    const RankTrace& t, const PassRecord& p,
    const std::optional<std::vector<sampler::Index>>& order);

// --- a run of several jobs (resumed_job_checks.cpp) ----------------------------------------------

/// What judging a job with the one it resumed found: findings about the epochs the earlier job
/// left unfinished, notes, and the loaders whose unfinished epoch was judged across the two
/// jobs (or could not be), whose per-job coverage findings and notes that judgement replaces.
struct ResumedJobJudgement {
  std::vector<sampler::Violation> violations;
  std::vector<std::string> notes;
  std::set<std::int64_t> loaders;
};

/// NOTE [A run of several jobs] (docs/audit.md): `after` resumed from a checkpoint of `before`;
/// each epoch `before` ended inside is judged with `after`'s first pass over the same loader.
/// `jobBefore` numbers `before` in the run (1: the first job) for the findings' text.
ResumedJobJudgement checkResumedJob(const Trace& before, const Trace& after, int jobBefore);

// --- what only a loader's whole run shows (across_epochs_checks.cpp) ---------------------------

/// Every complete training pass of `loader` left out the same samples of one dataset split across
/// the ranks (two epochs at least): the coverage finding naming them and why, or nothing.
std::optional<sampler::Violation> neverTrainedInAnyEpoch(const Trace& trace, std::int64_t loader,
                                                        OrderCache& cache);

/// `loader`'s sampler was given new epochs after the loader's last pass ran out, while training
/// went on over another loader: its batches came from a cache (itertools.cycle). The reshuffle
/// finding, or nothing.
std::optional<sampler::Violation> replayedFromACache(const Trace& trace, std::int64_t loader);

// --- whether the ranks' loaders hold one dataset (dataset_identity.cpp) --------------------------

/// Ranks whose ConcatDatasets differ (other parts, the same parts in another order, parts of other
/// lengths or items): the coverage finding naming what differs and the likely causes, or nothing
/// (also when they differ only in a part's file listing, which the listing check names).
std::optional<sampler::Violation> differentComposition(const std::vector<const RankTrace*>& traces,
                                                      std::int64_t loader);

/// Ranks whose TensorDatasets (or datasets of column tensors) hold other first, middle or last
/// rows: the coverage finding, and when their content digests agree (the same samples in other
/// orders: some on two ranks, NOTE [A split that loses and copies]) the disjointness finding
/// after it; empty when they agree.
std::vector<sampler::Violation> differentItems(const std::vector<const RankTrace*>& traces,
                                               std::int64_t loader);

/// The likely causes of data that differ across ranks by `kind`: "order", "length", "items" or
/// "items-or-order", and the remedy.
Explanation differentDataCause(const std::string& kind);

/// What tells one rank's dataset from another's: the loader's dataset class and everything the
/// recorder hashed of it (listing, items, content, a ConcatDataset's parts). Equal on ranks that
/// hold one dataset.
std::string datasetIdentity(const LoaderRecord& l);

/// Whether the recorder hashed anything of the loader's dataset (else datasetIdentity is its
/// class alone and tells nothing).
bool datasetHashed(const LoaderRecord& l);

/// Ranks whose datasets are Subsets of one base, of the sizes that split it across the ranks,
/// whose indices overlap or leave samples out (each drew its own split): the coverage finding, or
/// nothing (NOTE [Shards that are Subsets of one base]).
std::optional<sampler::Violation> overlappingSubsets(const std::vector<const RankTrace*>& traces,
                                                    std::int64_t loader);

/// Ranks that each hold a dataset of their own, where some hold the same one (their listing, rows
/// and parts agree): the disjointness finding naming them (LOCAL_RANK when they pair across
/// nodes), or nothing.
std::optional<sampler::Violation> sharedOwnDatasets(const std::vector<const RankTrace*>& traces,
                                                   std::int64_t loader);

// --- node topology (node_topology.cpp) -------------------------------------------------------------

/// One rank's sampler as it described itself in a pass, with the rank's own trace.
struct SamplerOnRank {
  const RankTrace* trace = nullptr;
  std::optional<std::int64_t> rank, numReplicas;
};

/// Why the ranks' samplers overlap when the evidence is the node topology: every sampler's rank
/// is its process's LOCAL_RANK where that is not its RANK ("sampler 0's rank is LOCAL_RANK, not
/// RANK: ranks 0 and 2 (local rank 0 on nodes 0 and 1) drew the same samples; …"), or its
/// num_replicas is LOCAL_WORLD_SIZE in a larger world. The ranks named share a local rank: the
/// first of `named` (the finding's ranks) when it is one of them. Nothing when the headers cannot
/// say.
std::optional<Explanation> nodeTopologyCause(const std::vector<SamplerOnRank>& ranks,
                                             std::int64_t samplerId,
                                             const std::vector<std::int64_t>& named = {});

/// The nodes (their ids, ascending) whose ranks are exactly `ranks`, when the ranks ran on more
/// than one node, every header names its node, and `ranks` are some nodes whole; else none.
std::vector<int> wholeNodesOf(const Trace& trace, const std::vector<std::int64_t>& ranks);

/// The report's "ranks per node" lines ("node 1 (node1): ranks 2, 3 (local ranks 0, 1)"), when
/// the ranks ran on more than one node (their headers' node and host name); else none.
std::vector<std::string> ranksPerNode(const Trace& trace);

// --- descriptions shared by the checks (describe.cpp) -------------------------------------------

/// "all_reduce float32[101770] (DDP gradient bucket 0 of backward 12)", "barrier (user call)".
std::string describeCollective(const CollectiveRecord& c);

/// "new_group([0, 1]) at train.py:25 in main": a `group_call` as findings name it.
std::string describeGroupCall(const GroupCall& c);

/// `lightning` when PyTorch Lightning drove the rank's loop (its `framework` line), else empty:
/// the words a cause adds in Lightning's vocabulary.
std::string frameworkHint(const RankTrace& t, std::string_view lightning);

/// Whether Lightning drove the rank's loop (its `framework` line).
bool drivenByLightning(const RankTrace& t);

/// What must agree across ranks: "all_reduce float32[10]"; pickled objects by op only.
std::string collectiveSignature(const CollectiveRecord& c);

/// "#17 on the default group", "#3 on group 1".
std::string collectiveNumber(const CollectiveRecord& c);

/// "loader 0 (CustomDataset, 600 samples)".
std::string describeLoader(const RankTrace& t, std::int64_t loader);

/// The pass of the last batch the rank was handed (its `batches.back()`), or nullptr.
const PassRecord* lastBatchPass(const RankTrace& t);

/// "epoch 2 step 14 of loader 0 (…)" for the last batch the rank was handed, or "before its first
/// batch".
std::string whereRankStood(const RankTrace& t);

/// "896..999", "3, 17, 40" or "3, 17, 40, … (12 in all)": runs of consecutive indices as ranges.
std::string describeIndices(const std::vector<sampler::Index>& sorted);

/// The first rank of `trace` that left a trace, or nullptr.
const RankTrace* firstTraced(const Trace& trace);

/// "ranks 1, 2, 3" / "rank 1".
std::string rankList(const std::vector<std::int64_t>& ranks);

/// The runs of consecutive values of `sorted`, as (first, last) pairs: {0, 1, 2, 5} gives
/// (0, 2), (5, 5). Each description formats them its own way ("0-2, 5", "896..999").
std::vector<std::pair<std::int64_t, std::int64_t>> consecutiveRuns(
    const std::vector<std::int64_t>& sorted);

/// Launch options a rerun adds to the user's own.
struct RerunWith {
  bool cpu = false;
  bool standInData = false;
};

/// The command that reruns the audited program with `with` added: the user's own `ddp-sim launch`
/// options and command after -- (its interpreter as they typed it: launch.json's `command`), else
/// python3 and the script's argv as the trace recorded them.
std::string rerunCommand(const Trace& trace, RerunWith with);

/// The interpreter the user ran the program with (launch.json's command[0]), else "python3".
std::string interpreterOf(const Trace& trace);

}  // namespace ddph::audit
