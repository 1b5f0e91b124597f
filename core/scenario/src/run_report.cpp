#include "ddph/scenario/run_report.h"

#include <fmt/format.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "ddph/common/error.h"
#include "ddph/sampler/violation_report.h"

namespace ddph::scenario {

using sampler::Violation;
using sampler::violationJson;
using sampler::violationsText;

std::string reportJson(const RunReport& r) {
  nlohmann::ordered_json j;
  j["scenario"] = r.scenario;
  j["source"] = r.source;
  j["world_size"] = r.worldSize;
  j["passed"] = r.passed;
  auto& violations = j["violations"] = nlohmann::ordered_json::array();
  for (const auto& v : r.violations) violations.push_back(violationJson(v));
  j["notes"] = r.notes;
  auto& timings = j["timings"] = nlohmann::ordered_json::object();
  for (const auto& [name, value] : r.timings) timings[name] = value;
  timings["per_rank"] = {{"step_compute_ms", r.stepComputeMs},
                         {"step_wait_ms", r.stepWaitMs},
                         {"peak_rss_mb", r.peakRssMb}};
  if (r.interruptedBy != 0) j["interrupted_by_signal"] = r.interruptedBy;
  return j.dump(2) + "\n";
}

std::string reportText(const RunReport& r) {
  std::string out = fmt::format("scenario {} ({}) on {} rank processes: {}\n", r.scenario, r.source,
                                r.worldSize, r.passed ? "PASSED" : "FAILED");
  if (!r.description.empty()) out += fmt::format("  {}\n", r.description);
  constexpr std::size_t kShown = 8;
  // A cause this run's own configuration explains is the violation's own (pipeline hints, set on
  // rank 0); the others get the catalogue's.
  // The same cause under the same property is shown once (zip's truncation in every epoch).
  std::vector<Violation> shown = r.violations;
  for (std::size_t i = 0; i < shown.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (r.violations[j].property == shown[i].property &&
          r.violations[j].likelyCause == r.violations[i].likelyCause) {
        shown[i].likelyCause.clear();
      }
    }
  }
  out += violationsText(shown, {}, kShown);
  for (std::size_t i = 0; i < r.notes.size() && i < kShown; ++i) {
    out += fmt::format("  note: {}\n", r.notes[i]);
  }
  if (r.notes.size() > kShown) out += fmt::format("  … {} more notes\n", r.notes.size() - kShown);
  const bool anyTimes = std::any_of(r.stepComputeMs.begin(), r.stepComputeMs.end(),
                                    [](double t) { return t > 0; });
  if (anyTimes) {
    const auto [lo, hi] = std::minmax_element(r.stepComputeMs.begin(), r.stepComputeMs.end());
    const auto slowest = hi - r.stepComputeMs.begin();
    out += fmt::format("  step compute per rank: min {:.3f} ms, max {:.3f} ms (rank {})\n", *lo, *hi,
                       slowest);
  }
  std::string times;
  for (const auto& [name, value] : r.timings) {
    times += fmt::format("{}{}={:.3g}", times.empty() ? "" : " ", name, value);
  }
  if (!times.empty()) out += fmt::format("  timings: {}\n", times);
  return out;
}

}  // namespace ddph::scenario
