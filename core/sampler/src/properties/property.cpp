#include "ddph/sampler/property.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ddph::sampler {

const std::vector<PropertyInfo>& samplerProperties() {
  static const std::vector<PropertyInfo> kProperties = {
      {property::kValidRange, "every index is in [0, N)",
       "the sampler pads or splits past the end of the dataset",
       "pad with indices of the dataset (PyTorch repeats the head of the order)"},
      {property::kEqualLength,
       "every rank yields the same number of indices, equal to its declared length",
       "uneven shards make ranks run different numbers of steps and the job hangs in a collective",
       "pad to ceil(N / W) per rank or use drop_last"},
      {property::kCoverage,
       "the union over ranks holds every index (or exactly the kept ones with drop_last)",
       "ranks do not share one order (per-rank seed, per-rank dataset order) or indices are lost "
       "when splitting",
       "give every rank the same seed and the same dataset order"},
      {property::kDisjointness,
       "an index appears on more than one rank only as padding: exactly total_size - N extra copies",
       "ranks do not share one order, so their shards overlap", "seed every rank identically"},
      {property::kPadding,
       "the extra copies are the head of the epoch's order, tiled when longer than N",
       "the sampler pads with the wrong elements", "pad with order[:total_size - N]"},
      {property::kReshuffle,
       "with shuffle, consecutive epochs give different orders; without it the order is 0..N-1",
       "set_epoch(epoch) is not called before each epoch, so every epoch repeats the same order",
       "call sampler.set_epoch(epoch) at the start of every epoch, before iterating the loader"},
      {property::kDeterminism, "the same request (seed, epoch, rank) gives the same indices",
       "the sampler draws from an unseeded or global generator",
       "seed a private generator from the seed and the epoch"},
      {property::kSeedPlusEpoch,
       "the order depends on seed and epoch only through seed + epoch, as torch's "
       "DistributedSampler seeds its generator",
       "the sampler mixes seed and epoch otherwise (a hash, seed * K + epoch, or the epoch "
       "alone), so it is not bit-exact with torch's order",
       "seed the generator with seed + epoch where torch's order is what is promised"},
      // The three below are not DistributedSampler's promises: they make the `exactly-once`
      // (evaluation sharding) and `with-replacement` contracts (see ddph/verify/contract.h).
      {property::kNoDuplicates, "no index appears twice, on one rank or across ranks",
       "the sampler pads shards to equal length (as DistributedSampler does) or ranks overlap",
       "for evaluation shard without padding, e.g. indices[rank::num_replicas]"},
      {property::kBalancedLength,
       "shard lengths differ by at most one and match the declared lengths",
       "the split gives the remainder to one rank or drops it",
       "spread the N % W leftover indices over the first ranks, one each"},
      {property::kRanksAgree,
       "the ranks split one shared draw: no rank yields a copy of another rank's shard",
       "every rank draws the whole epoch with the same seed but does not take its own part, so "
       "all ranks train on the same samples",
       "take the rank's own part of the shared draw, e.g. indices[rank::num_replicas]"},
      // The `elastic` contract: stop mid-epoch on W ranks, resume on W' (docs/elastic-resume.md).
      {property::kResumeExactlyOnce,
       "the samples consumed before a resume and those yielded after it cover the epoch exactly "
       "once, apart from the padding (or drop_last's cut) of the run that reaches its end",
       "the sampler restarts the epoch on resume (samples repeated) or keeps per-rank positions "
       "across a change of world size (samples lost and repeated)",
       "resume from the position all ranks reached in the epoch's one order "
       "(ddph_elastic.ElasticDistributedSampler)"},
      {property::kResumeOrder,
       "resumed on the same world size, every rank continues the uninterrupted run index for index",
       "the resumed run re-draws, re-pads or re-strides the rest of the epoch",
       "continue the epoch's order from the position every rank reached, padded with the order's "
       "head"},
      {property::kResumeBalance,
       "after a resume every rank yields the same number of samples",
       "the rest of the epoch is split without padding, so ranks run different numbers of steps "
       "and the job hangs in a collective",
       "pad the resumed run to a multiple of the new world size"},
  };
  return kProperties;
}

const std::vector<PropertyInfo>& runProperties() {
  static const std::vector<PropertyInfo> kProperties = {
      {property::kCollectiveMismatch,
       "every rank runs the same collectives in the same order (same number of steps)",
       "ranks have different numbers of batches (uneven shards, per-rank data), so one rank stops "
       "calling the gradient allreduce and a real job hangs",
       "pad shards to equal length (DistributedSampler) or use drop_last / DDP's join()"},
      {property::kRankFailure, "every rank runs to the end",
       "a rank crashed (OOM kill, exception, signal) or stopped answering; the others block in "
       "their next collective until the timeout",
       "check the failed rank's log and exit status"},
      {property::kStraggler,
       "no rank's step time is far above the others' (the others wait for it in every allreduce)",
       "one rank computes or loads data slower (slower worker, more data, contention)",
       "balance the work or look for the slow rank's data loading"},
      {property::kProcessGroup, "the ranks of the run join a process group (init_process_group)",
       "the processes never called init_process_group, so nothing was distributed: each trained "
       "alone (or the ranks that did were not recorded)",
       "call init_process_group in every rank"},
  };
  return kProperties;
}

const std::vector<PropertyInfo>& trainingProperties() {
  static const std::vector<PropertyInfo> kProperties = {
      {property::kGradientEquivalence,
       "W data-parallel ranks with a per-rank mean loss end every step with the gradients, and "
       "after k optimizer steps with the parameters, of one process trained on the concatenated "
       "global batch",
       "the loss is summed instead of averaged (gradients 1/W too small), ranks see batches of "
       "different sizes (uneven last batch), BatchNorm normalises with per-rank statistics, a rank "
       "skipped a step, or the replicas started from different weights (no broadcast from rank 0)",
       "average the loss over the global batch, pad the last batch or drop it, use SyncBatchNorm, "
       "and build DDP before the first step (it broadcasts rank 0's weights)"},
      {property::kReplicaConsistency,
       "every rank's model parameters are identical at the same point of the run",
       "the replicas diverged: an optimizer step or a parameter change ran on some ranks only "
       "(e.g. `if rank == 0: optimizer.step()`)",
       "step the optimizer on every rank"},
      {property::kParameterUpdates,
       "an epoch that ran backward passes changes the model's parameters",
       "the gradients were never applied, or were zero: no optimizer.step() after "
       "loss.backward(), a learning rate of 0, or a loss whose gradient is zero (CrossEntropyLoss "
       "over a single output, a detached output); the trace cannot tell these apart",
       "check that the optimizer steps and that the parameters' .grad are non-zero"},
  };
  return kProperties;
}

const PropertyInfo* findProperty(std::string_view name) {
  for (const auto* list : {&samplerProperties(), &runProperties(), &trainingProperties()}) {
    for (const auto& p : *list) {
      if (p.name == name) return &p;
    }
  }
  return nullptr;
}

std::string likelyCauseOf(const Violation& v) {
  if (!v.likelyCause.empty()) return v.likelyCause;
  if (const PropertyInfo* info = findProperty(v.property)) return std::string(info->likelyCause);
  return {};
}

std::string helpOf(const Violation& v) {
  if (!v.help.empty() || !v.likelyCause.empty()) return v.help;
  if (const PropertyInfo* info = findProperty(v.property)) return std::string(info->help);
  return {};
}

std::string formatViolation(const Violation& v) {
  std::string where;
  if (v.epoch >= 0) where += fmt::format(" at epoch {}", v.epoch);
  if (v.step >= 0) where += fmt::format(" step {}", v.step);
  if (!v.ranks.empty()) where += fmt::format(" on rank{} {}", v.ranks.size() == 1 ? "" : "s",
                                             fmt::join(v.ranks, ", "));
  return fmt::format("{}{}: {}", v.property, where, v.detail);
}

}  // namespace ddph::sampler
