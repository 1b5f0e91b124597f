#pragma once
// Departures from a correct data-parallel setup, for tests that check the gradient-equivalence
// checker finds them (the negative controls): kept out of TrainingSetup, which describes a
// correct setup only.

#include <string>

#include "ddph/ddp/ddp_mutant.h"
#include "ddph/ddp/gradient_equivalence.h"

namespace ddph::ddp {

struct NegativeControls {
  /// In the last step, the last rank gets one sample less (the global batch is W*B - 1).
  bool unevenLastBatch = false;
  /// Rank `skipRank` skips step `skipStep` entirely (-1: nobody skips).
  int skipRank = -1;
  int skipStep = -1;
  /// Each rank initialises its replica from seed + rank and DDP does not broadcast from rank 0.
  bool noInitialBroadcast = false;
  /// DistributedDataParallel itself broken (NOTE [DDP mutants]) on rank `mutantRank`, or on every
  /// rank when it is -1.
  DdpMutant ddpMutant = DdpMutant::kNone;
  int mutantRank = -1;
};

/// defaultTolerance(setup), never exact with an uneven last batch.
Tolerance defaultTolerance(const TrainingSetup& setup, const NegativeControls& controls);

/// checkGradientEquivalence of `setup` trained with `controls`' departures.
EquivalenceReport checkGradientEquivalence(const TrainingSetup& setup,
                                           const NegativeControls& controls,
                                           const Tolerance& tolerance);
inline EquivalenceReport checkGradientEquivalence(const TrainingSetup& setup,
                                                  const NegativeControls& controls) {
  return checkGradientEquivalence(setup, controls, defaultTolerance(setup, controls));
}

/// describeSetup with the departures ("uneven-last-batch", "ddp-mutant=…@rank2", …).
std::string describeSetup(const TrainingSetup& setup, const NegativeControls& controls);

}  // namespace ddph::ddp
