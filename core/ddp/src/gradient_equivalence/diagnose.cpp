#include "gradient_equivalence/diagnose.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

#include "ddph/sampler/property.h"
#include "gradient_equivalence/compare.h"

namespace ddph::ddp::equivalence {

using sampler::Violation;
namespace property = sampler::property;

namespace {

std::string errorKind(const std::string& message) {
  return message.size() > 300 ? message.substr(0, 300) + "…" : message;
}

Violation equivalenceViolation(std::vector<std::int64_t> ranks, std::int64_t step,
                               std::string detail) {
  Violation v;
  v.property = std::string(property::kGradientEquivalence);
  v.ranks = std::move(ranks);
  v.step = step;
  v.detail = std::move(detail);
  return v;
}

// The most likely reason one step's gradients differ, from what the comparison saw.
// Why the ranks hold different gradients after backward, or "" when they agree.
std::string splitCause(const StepComparison& c, const Run& rank0,
                       const std::vector<std::string>& names) {
  if (c.splitParams.empty() || c.classes.size() < 2) return "";
  const auto W = c.sizes.size();
  std::vector<std::string> split;
  for (std::size_t k : c.splitParams) split.push_back("'" + names[k] + "'");
  if (c.classes.size() == W && c.splitParams.size() == names.size()) {
    return "no two ranks hold the same gradient of any parameter after backward: nothing was "
           "averaged across ranks (the allreduce was skipped); DDP must leave every rank with the "
           "same averaged gradients";
  }
  if (c.classes.size() == W) {
    std::string bucket;
    for (std::size_t b = 0; b < rank0.bucketParams.size(); ++b) {
      auto params = rank0.bucketParams[b];
      std::sort(params.begin(), params.end());
      if (params == c.splitParams) {
        bucket = fmt::format(", exactly bucket {} of {}", b, rank0.bucketParams.size());
      }
    }
    return fmt::format(
        "every rank holds its own gradient of {} ({} of {} parameters{}) and the same as the others "
        "for the rest: {} never allreduced",
        fmt::join(split, ", "), c.splitParams.size(), names.size(), bucket,
        bucket.empty() ? "those gradients were" : "that bucket was");
  }
  // A majority agrees: the others reduced, but paired their buckets with other buckets.
  const auto largest = std::max_element(
      c.classes.begin(), c.classes.end(),
      [](const auto& a, const auto& b) { return a.size() < b.size(); });
  std::vector<int> odd;
  for (const auto& cls : c.classes) {
    if (&cls != &*largest) odd.insert(odd.end(), cls.begin(), cls.end());
  }
  std::sort(odd.begin(), odd.end());
  return fmt::format(
      "rank(s) {} hold gradients of {} different from the other {} ranks', which agree: their "
      "allreduces paired different buckets (DDP launched its buckets in another order there; Gloo "
      "and NCCL pair collectives by the order they start)",
      fmt::join(odd, ", "), fmt::join(split, ", "), largest->size());
}

std::string gradientCause(const StepComparison& c, int W, int step, const std::string& stepsNote,
                          bool divergedStart, bool batchNorm, const std::string& split) {
  const bool unevenSizes =
      std::adjacent_find(c.sizes.begin(), c.sizes.end(), std::not_equal_to<>()) != c.sizes.end();
  if (c.allScaled) {
    return fmt::format(
        "every DDP gradient is exactly 1/W = 1/{} of the single-process one: the loss is summed "
        "over the batch, and DDP averages gradients over ranks; use a mean-reduced loss (or scale "
        "a summed loss by W)",
        W);
  }
  if (c.allTimesW) {
    return fmt::format(
        "every DDP gradient is exactly W = {} times the single-process one: gradients were "
        "summed over ranks instead of averaged (divide by the world size)",
        W);
  }
  if (!split.empty() && !divergedStart) return split;
  if (!stepsNote.empty()) {
    return fmt::format("per-rank batch sizes at this step were [{}] (0: skipped or failed){}",
                       fmt::join(c.sizes, ", "), stepsNote);
  }
  if (unevenSizes) {
    return fmt::format(
        "the ranks had batches of different sizes [{}]: each rank's mean loss weighs its samples "
        "by 1/(W * B_rank) instead of 1/N, so averaging over ranks is not the global mean; give "
        "every rank a batch of the same size (drop_last, or pad the last batch)",
        fmt::join(c.sizes, ", "));
  }
  if (divergedStart) return "follows from the different starting weights (see step 0)";
  if (batchNorm) {
    return "the model has BatchNorm layers, and each rank normalises with the statistics of its "
           "own batch instead of the global batch's; use synchronised BatchNorm or a "
           "normalisation that is per sample";
  }
  if (step > 0) {
    return "the parameters already differed after the previous step, or DDP averaged wrongly";
  }
  return "no known cause: DDP's averaged gradients are not the single-process gradients";
}

}  // namespace

std::string unequalStepsNote(const std::vector<Run>& ranks) {
  std::vector<std::string> skipped;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (std::size_t step = 0; step < ranks[r].grads.size(); ++step) {
      if (ranks[r].grads[step].empty()) skipped.push_back(fmt::format("rank {} step {}", r, step));
    }
  }
  if (skipped.empty()) return {};
  return fmt::format(
      "; the ranks ran different numbers of steps (skipped: {}): their collectives paired "
      "gradients of different steps, and a rank with more steps then waited for a peer that "
      "never came. Every rank must run every step (pad or drop the last batch instead of "
      "skipping one)",
      fmt::join(skipped, ", "));
}

void checkFailedRanks(const std::vector<Run>& ranks, const std::string& stepsNote,
                      EquivalenceReport& report) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Run& run = ranks[r];
    if (run.error.empty()) continue;
    report.violations.push_back(equivalenceViolation(
        {static_cast<std::int64_t>(r)}, run.failedStep,
        fmt::format("rank {} failed and could not finish training: {}{}", r, errorKind(run.error),
                    stepsNote)));
  }
}

std::vector<std::int64_t> checkStartingWeights(const std::vector<Run>& ranks,
                                               EquivalenceReport& report) {
  std::vector<std::int64_t> diverged;
  double gap = 0.0;
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    if (ranks[r].initial.empty() || ranks[0].initial.empty()) continue;
    const auto [d, index] = worst(ranks[r].initial, ranks[0].initial, Tolerance{});
    if (d.absolute > 0) {
      diverged.push_back(static_cast<std::int64_t>(r));
      gap = std::max(gap, d.absolute);
    }
  }
  if (!diverged.empty()) {
    report.violations.push_back(equivalenceViolation(
        diverged, 0,
        fmt::format("the replicas started from different weights (largest difference to rank 0: "
                    "{:.3g}): parameters were not broadcast from rank 0 before training, so every "
                    "rank trains its own model and no single-process run computes the same",
                    gap)));
  }
  return diverged;
}

void checkGradients(const TrainingSetup& s, const Run& reference, const std::vector<Run>& ranks,
                    const Tolerance& tolerance, const std::string& stepsNote, bool divergedStart,
                    EquivalenceReport& report) {
  for (int step = 0; step < s.steps; ++step) {
    const StepComparison c = compareStep(
        ranks, reference.grads[static_cast<std::size_t>(step)], step, tolerance, report);
    if (c.deviating.empty()) continue;
    const std::string why =
        gradientCause(c, s.worldSize, step, stepsNote, divergedStart, s.model.batchNorm,
                      splitCause(c, ranks[0], reference.names));
    report.violations.push_back(equivalenceViolation(
        c.deviating, step,
        fmt::format("gradients differ from one process on the global batch of {}: worst on rank "
                    "{}, parameter '{}', max |ddp - single| = {:.3g} against max |single| = "
                    "{:.3g} (tolerance {:.1g} relative + {:.1g}); {}",
                    reference.batchSizes[static_cast<std::size_t>(step)], c.worstRank,
                    reference.names[c.worstParam], c.worst.absolute, c.worst.scale,
                    tolerance.relative, tolerance.absolute, why)));
  }
}

void checkFinalParameters(const TrainingSetup& s, const Run& reference,
                          const std::vector<Run>& ranks, const Tolerance& tolerance,
                          EquivalenceReport& report) {
  std::vector<std::int64_t> deviating;
  Deviation worstDev;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].final.empty()) continue;
    const auto [d, index] = worst(ranks[r].final, reference.final, tolerance);
    report.maxParameterError = std::max(report.maxParameterError, d.relative());
    if (d.exceeds(tolerance)) {
      deviating.push_back(static_cast<std::int64_t>(r));
      if (d.relative() > worstDev.relative()) worstDev = d;
    }
  }
  if (deviating.empty()) return;
  report.violations.push_back(equivalenceViolation(
      deviating, /*step: not one step's finding*/ -1,
      fmt::format("parameters after {} {} step(s) differ from one process on the global batch: "
                  "max |ddp - single| = {:.3g} against max |single| = {:.3g}",
                  s.steps, s.optimizer == OptimizerKind::kAdam ? "Adam" : "SGD-momentum",
                  worstDev.absolute, worstDev.scale)));
}

}  // namespace ddph::ddp::equivalence
