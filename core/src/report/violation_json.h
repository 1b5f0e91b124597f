#pragma once
// One violation as JSON, the same in every report (`ddp-sim run`, `ddp-sim audit`):
// {"property":…, "ranks":[…], "epoch":…, "step":…, "detail":…, "likely_cause":…}.

#include <nlohmann/json.hpp>

#include "ddph/properties/property.h"

namespace ddph {

inline nlohmann::ordered_json violationJson(const Violation& v) {
  nlohmann::ordered_json j = {{"property", v.property}, {"ranks", v.ranks}, {"epoch", v.epoch},
                              {"step", v.step},         {"detail", v.detail}};
  const std::string cause = likelyCauseOf(v);
  if (!cause.empty()) j["likely_cause"] = cause;
  return j;
}

}  // namespace ddph
