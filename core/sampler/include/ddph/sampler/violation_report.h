#pragma once
// Violations shown the same way in every report (`ddp-sim run`, `ddp-sim audit`): as JSON,
// {"property":…, "ranks":[…], "epoch":…, "step":…, "detail":…, "likely_cause":…, "notes":[…],
// "help":…} (the last three when there are any), and as the "FAIL …" lines people read, each
// followed by its `likely cause:`, `note:` and `help:` lines, as a compiler prints a diagnostic.

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
  if (!v.notes.empty()) j["notes"] = v.notes;
  const std::string help = helpOf(v);
  if (!help.empty()) j["help"] = help;
  return j;
}

/// The "FAIL …" lines of a report, each with its likely cause (the violation's own, else the
/// catalogue's once per property; `hints`, this run's own causes, go with the first), its notes
/// and its help (the catalogue's with the catalogue's cause), at most `shown` of them.
std::string violationsText(const std::vector<Violation>& violations,
                           const std::vector<std::string>& hints, std::size_t shown);

}  // namespace ddph::sampler
