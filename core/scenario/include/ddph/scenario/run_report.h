#pragma once
// The result of `ddp-sim run`: JSON for machines, a summary for people.
//
// JSON: {"scenario":…, "world_size":…, "passed":bool,
//        "violations":[{"property":…, "ranks":[…], "epoch":…, "step":…, "detail":…,
//                       "likely_cause":…}],
//        "notes":[…], "timings":{"total_s":…, "spawn_s":…, "connect_s":…, "run_s":…, …,
//        "per_rank":{"step_compute_ms":[…], "step_wait_ms":[…], "peak_rss_mb":[…]}}}

#include <string>
#include <utility>
#include <vector>

#include "ddph/sampler/property.h"
#include "ddph/sampler/violation_report.h"  // violationsText

namespace ddph::scenario {

struct RunReport {
  std::string scenario;
  std::string source;
  std::string description;
  int worldSize = 0;
  bool passed = true;
  std::vector<sampler::Violation> violations;
  std::vector<std::string> notes;
  /// Scalar timings in seconds or MB, in the order they are shown ("total_s", …).
  std::vector<std::pair<std::string, double>> timings;
  std::vector<double> stepComputeMs;  ///< per rank, mean per step
  std::vector<double> stepWaitMs;     ///< per rank, mean time in the gradient allreduce per step
  std::vector<double> peakRssMb;      ///< per rank, from wait4
  int interruptedBy = 0;              ///< signal that stopped the run (0: none)
};

std::string reportJson(const RunReport& report);

/// Which property broke, on which ranks, at which epoch and step, with the likely cause and fix.
std::string reportText(const RunReport& report);

}  // namespace ddph::scenario
