#pragma once
// Violations shown the same way in every report (`ddp-sim run`, `ddp-sim audit`): as JSON,
// {"property":…, "ranks":[…], "epoch":…, "step":…, "detail":…, "likely_cause":…}, and as the
// "FAIL …" lines people read.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "ddph/sampler/property.h"

namespace ddph::sampler {

inline nlohmann::ordered_json violationJson(const Violation& v) {
  nlohmann::ordered_json j = {{"property", v.property}, {"ranks", v.ranks}, {"epoch", v.epoch},
                              {"step", v.step},         {"detail", v.detail}};
  const std::string cause = likelyCauseOf(v);
  if (!cause.empty()) j["likely_cause"] = cause;
  return j;
}

/// The "FAIL …" lines of a report, each with its likely cause (the violation's own, else the
/// catalogue's once per property; `hints`, this run's own causes, go with the first), at most
/// `shown` of them.
std::string violationsText(const std::vector<Violation>& violations,
                           const std::vector<std::string>& hints, std::size_t shown);

}  // namespace ddph::sampler
