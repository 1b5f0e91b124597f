#include "rank_report.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace ddph::scenario {

using Json = nlohmann::json;

std::string rankReportLine(const RankReport& r) {
  return Json{{"steps", r.steps},
              {"compute_s", r.computeS},
              {"wait_s", r.waitS},
              {"epoch_s", r.epochS},
              {"connect_s", r.connectS},
              {"pss_mb", r.pssMb ? Json(*r.pssMb) : Json(nullptr)},
              {"trace_failure", r.traceFailure}}
      .dump();
}

std::optional<RankReport> findRankReport(const std::string& output) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("steps")) continue;
    RankReport r;
    r.steps = j.value("steps", std::int64_t{0});
    r.computeS = j.value("compute_s", 0.0);
    r.waitS = j.value("wait_s", 0.0);
    r.epochS = j.value("epoch_s", 0.0);
    r.connectS = j.value("connect_s", 0.0);
    if (j.contains("pss_mb") && j["pss_mb"].is_number()) r.pssMb = j["pss_mb"].get<double>();
    r.traceFailure = j.value("trace_failure", "");
    return r;
  }
  return std::nullopt;
}

}  // namespace ddph::scenario
