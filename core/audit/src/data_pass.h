#pragma once
// One pass over a loader, as every data check sees it (data_*_checks.cpp): each rank's view of it
// (RankPass: what its sampler yields, what it consumed, whether it was dropped), what kind of pass
// it is, and the partition of the ranks' orders or consumed indices that partition_checks.h
// judges. What other check families read of a pass (samplerOrder, consumedIndices, completePass,
// runEndsInside) is declared in audit_checks.h and defined in data_pass.cpp too.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "audit_checks.h"
#include "ddph/sampler/partition_checks.h"

namespace ddph::audit {

/// One rank's view of one pass over a loader.
struct RankPass {
  const RankTrace* trace = nullptr;
  const PassRecord* pass = nullptr;
  /// everything the sampler yields in this pass
  std::optional<std::vector<sampler::Index>> order;
  std::optional<std::vector<sampler::Index>> consumed;  ///< the indices of the batches handed out
  bool dropped = false;  ///< ended early while the rank went on normally (not a cycle)
};

/// NOTE [A split in two levels] (docs/audit.md): the groups of ranks among which one dataset is
/// split. The whole world, but when the ranks hold different datasets, each shared by a group of
/// ranks that its sampler splits among themselves (DistributedSampler(num_replicas=
/// LOCAL_WORLD_SIZE, rank=LOCAL_RANK) over a node's own shard files): one group per dataset, in
/// the order of their first ranks.
std::vector<std::vector<RankPass>> splitGroups(const std::vector<RankPass>& ranks,
                                               std::int64_t loader);

/// The line where the loader's next pass on rank `t` after `p` starts, or past the trace's end.
std::int64_t nextPassLine(const RankTrace& t, const PassRecord& p);

/// The program's own collectives rank `rp` made after its pass's last batch and before the
/// loader's next pass (or the end of the trace), in group order.
std::vector<const CollectiveRecord*> userCollectivesAfterPass(const RankPass& rp);

/// NOTE [What a metric summed] (docs/audit.md): the values of the small all_reduces (`coll_done`
/// values: a metric's sums) that the program made on these ranks after their pass and before the
/// loader's next one (or the end of the trace).
std::set<double> sumsAfterPass(const std::vector<RankPass>& ranks);

/// Whether some loader of `t` draws from sampler `id`.
bool drawnByALoader(const RankTrace& t, std::int64_t id);

/// "torch's global generator (torch.randperm without a generator of its own)" and the call that
/// seeds it ("torch.manual_seed"), for a `global_draw` generator's name.
std::pair<std::string, std::string> globalGenerator(const std::string& name);

/// The last seed of `generator` rank `t` set before trace line `line`, or null.
const SeedCall* lastSeedBefore(const RankTrace& t, const std::string& generator, std::int64_t line);

/// torch's DistributedSampler's shard of pass `p` under sampler `s` (its num_replicas, rank, seed,
/// shuffle, drop_last and the pass's sampler epoch), recomputed, or nothing when the pass does not
/// say which shard it drew.
std::optional<std::vector<sampler::Index>> distributedOrder(const SamplerRecord& s,
                                                            const PassRecord& p, OrderCache& cache);

/// Every rank's view of pass `iter` of `loader`, or empty when some rank has no such pass.
std::vector<RankPass> passAcrossRanks(const Trace& trace, std::int64_t loader, std::int64_t iter,
                                      OrderCache& cache);

/// Whether every rank's order (or, with `consumed`, what it consumed) is known.
bool allKnown(const std::vector<RankPass>& ranks, bool consumed);

/// The ranks' orders (or, with `consumed`, what they consumed) as one partition of [0, n).
sampler::Partition partitionOf(const std::vector<RankPass>& ranks, std::int64_t n,
                               std::int64_t epoch, bool consumed);

/// The ranks' own traces, in the order of `ranks`.
std::vector<const RankTrace*> tracesOf(const std::vector<RankPass>& ranks);

/// An evaluation pass: every batch was handed out with gradients off (torch.no_grad()).
bool isEvaluation(const PassRecord& p);

/// Every rank ran the pass to its end, every batch with gradients off: an evaluation across the
/// ranks, judged by what it counted (data_evaluation_checks.cpp).
bool evaluatedOnEveryRank(const std::vector<RankPass>& ranks);

/// torch's samplers that know nothing of ranks: DataLoader(shuffle=True) makes a RandomSampler,
/// DataLoader() a SequentialSampler, each over the whole dataset on every rank.
bool isWholeDatasetSampler(const SamplerRecord* s);

/// A sampler that splits one dataset across ranks: torch's DistributedSampler, or one that says
/// how many replicas it splits for. Under another sampler each rank's own dataset is by design.
bool promisesOneDataset(const SamplerRecord* s);

/// The pass of another loader that ran out while `p` was running (zip's shorter loader), or null.
const PassRecord* exhaustedPartner(const RankTrace& t, const PassRecord& p);

/// zip(a, b) asks a for its next batch before b: in the round where b runs out, a's batch was
/// handed out and thrown away. Whether `p`'s last batch is that one.
bool lastBatchDiscarded(const RankTrace& t, const PassRecord& p);

}  // namespace ddph::audit
