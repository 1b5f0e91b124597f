#include "ddph/train/training_page.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "ddph/report/verdict.h"
#include "ddph/sampler/property.h"

namespace ddph::train {

using sampler::Violation;
namespace property = sampler::property;

namespace {

/// Why `dataset` lost samples, when the mix explains it; empty: the catalogue's cause.
std::string neverSeenCause(const TrainingReport& r) {
  if (r.config.mix != data::Mix::kZip || r.config.datasets.size() < 2) return "";
  return "--mix zip ends every epoch with the shortest dataset (Python's zip(loader1, loader2)): the "
         "rest of the longer one is never seen; --mix cycle re-reads the shorter dataset instead, "
         "--mix concat takes each one whole";
}

std::string seenTwiceCause(const TrainingReport& r) {
  if (r.config.mix == data::Mix::kCycle && r.config.datasets.size() > 1) {
    return "--mix cycle re-reads the shorter dataset";
  }
  return "DistributedSampler pads every epoch to a multiple of the world size";
}

report::Verdict verdictOf(const TrainingReport& r) {
  std::vector<Violation> violations;
  std::vector<std::string> notes;
  for (const auto& e : r.epochs) {
    const bool whole = e.steps >= e.plannedSteps;
    if (!whole) {
      notes.push_back(fmt::format("epoch {} stopped after {} of its {} steps ({}): its counts are of "
                                  "part of an epoch and are not judged",
                                  e.epoch, e.steps, e.plannedSteps,
                                  r.stoppedBySignal != 0 ? "a signal" : "--steps"));
    }
    for (const auto& d : e.datasets) {
      if (whole && d.visits.neverSeen > 0) {
        violations.push_back({std::string(property::kCoverage), {}, e.epoch, -1,
                              fmt::format("{}: {} of {} samples never seen in epoch {}", d.dataset,
                                          d.visits.neverSeen, d.visits.datasetSize, e.epoch),
                              neverSeenCause(r)});
      }
      if (d.visits.seenMoreThanOnce > 0) {
        notes.push_back(fmt::format("{}: {} samples seen twice or more in epoch {} ({})", d.dataset,
                                    d.visits.seenMoreThanOnce, e.epoch, seenTwiceCause(r)));
      }
    }
  }
  if (r.stoppedBySignal != 0) {
    notes.push_back(fmt::format("stopped by signal {} after step {}", r.stoppedBySignal, r.globalSteps));
  }
  return report::verdictOf(violations.empty(), violations, notes, {property::kCoverage});
}

report::Training trainingOf(const TrainingReport& r) {
  report::Training t;
  for (const auto& e : r.epochs) {
    for (const auto& s : e.stepLog) {
      t.steps.push_back({e.epoch, s.step, s.loss,
                         s.seconds > 0 ? static_cast<double>(s.samples) / s.seconds : 0.0});
    }
    for (const auto& d : e.datasets) {
      t.datasets.push_back({d.dataset, e.epoch, d.visits.datasetSize, d.visits.seen,
                            d.visits.neverSeen, d.visits.seenMoreThanOnce});
    }
  }
  return t;
}

}  // namespace

report::Page trainingPage(const TrainingReport& r) {
  report::Page page;
  page.title = "ddp-train";
  page.verdict = verdictOf(r);
  std::string data = fmt::format("{}", fmt::join(r.config.datasets, ", "));
  if (r.config.datasets.size() > 1) data += " mixed by " + data::mixName(r.config.mix);
  page.subtitle = fmt::format("{} on {} rank{} ({}), {} epoch{} run, {} steps: {}", data, r.worldSize,
                              r.worldSize == 1 ? "" : "s", r.backend, r.epochs.size(),
                              r.epochs.size() == 1 ? "" : "s", r.globalSteps,
                              page.verdict.passed ? "PASSED" : "FAILED");
  page.training = trainingOf(r);
  return page;
}

void writeTrainingPage(const TrainingReport& report, const std::string& path) {
  report::writeHtmlReport(path, trainingPage(report));
}

}  // namespace ddph::train
