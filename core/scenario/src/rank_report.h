#pragma once
// Private to the scenario library: what a forked rank of `ddp-sim run` tells its supervisor when
// it ends well: its own measurements, one JSON line on its result pipe. Never a verdict: the run is
// judged over its trace (the one judge: scenario_plan.h).

#include <cstdint>
#include <optional>
#include <string>

namespace ddph::scenario {

struct RankReport {
  std::int64_t steps = 0;       ///< steps with a batch, all epochs
  double computeS = 0;          ///< between collectives (data + "compute")
  double waitS = 0;             ///< inside the gradient allreduces
  double epochS = 0;            ///< wall time of the epochs
  double connectS = 0;          ///< from the fork to every peer connected
  std::optional<double> pssMb;  ///< its own pages (own_pss.h), when it could read them
  std::string traceFailure;     ///< why its trace stops short (a full disk), or empty
};

/// The line (no '\n').
std::string rankReportLine(const RankReport& report);

/// The report among what a rank wrote to its result pipe; nothing when it wrote none (it failed,
/// or was killed before; a half line from a killed rank is no report).
std::optional<RankReport> findRankReport(const std::string& output);

}  // namespace ddph::scenario
