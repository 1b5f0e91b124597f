#pragma once
// What the comparison means: the findings of `gradient-equivalence`, each with the most likely
// cause drawn from what was observed (failed ranks, different starting weights, gradients off by
// exactly 1/W or W, uneven batches, ranks that disagree after backward, BatchNorm).

#include <cstdint>
#include <string>
#include <vector>

#include "ddph/ddp/gradient_equivalence.h"
#include "gradient_equivalence/run.h"

namespace ddph::ddp::equivalence {

/// The ranks and steps a rank skipped (it recorded no gradients for them while its loop went
/// on), as the note every finding then carries; empty when every rank ran every step.
std::string unequalStepsNote(const std::vector<Run>& ranks);

/// 1. Ranks that failed (a timeout or a broken collective).
void checkFailedRanks(const std::vector<Run>& ranks, const std::string& stepsNote,
                      EquivalenceReport& report);

/// 2. Replicas that did not start from rank 0's weights; returns them.
std::vector<std::int64_t> checkStartingWeights(const std::vector<Run>& ranks,
                                               EquivalenceReport& report);

/// 3. Gradients, step by step.
void checkGradients(const TrainingSetup& s, const Run& reference, const std::vector<Run>& ranks,
                    const Tolerance& tolerance, const std::string& stepsNote, bool divergedStart,
                    EquivalenceReport& report);

/// 4. Parameters after the last step.
void checkFinalParameters(const TrainingSetup& s, const Run& reference,
                          const std::vector<Run>& ranks, const Tolerance& tolerance,
                          EquivalenceReport& report);

}  // namespace ddph::ddp::equivalence
