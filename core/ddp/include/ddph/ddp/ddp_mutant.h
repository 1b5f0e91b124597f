#pragma once
// Deliberately broken DistributedDataParallel: the mutants the gradient-equivalence checker must
// catch, each with its own diagnosis. NOTE [DDP mutants]: ddp.md#mutants-of-ddp-itself.
// Torch-free: the checker's setup names them too.

namespace ddph::ddp {

enum class DdpMutant {
  kNone,
  kSumNotAverage,   ///< gradients summed over ranks, never divided by the world size
  kSkipLastBucket,  ///< the last bucket is never allreduced: its gradients stay each rank's own
  kSkipAllreduce,   ///< no bucket is allreduced: every gradient stays each rank's own
  kReverseBuckets,  ///< buckets launched last to first (on one rank: they pair other buckets)
};

/// "sum-not-average", "skip-last-bucket", …; "none".
const char* ddpMutantName(DdpMutant mutant);

}  // namespace ddph::ddp
