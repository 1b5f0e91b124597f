#pragma once
// The built-in catalogue: each entry reproduces a classic distributed data bug (or none, for
// `healthy`) and names the property that diagnoses it.

#include <string>
#include <string_view>
#include <vector>

#include "ddph/scenario/scenario.h"

namespace ddph {

struct BuiltinScenario {
  std::string_view name;
  std::string_view toml;  ///< the scenario, in the scenario file format
};

const std::vector<BuiltinScenario>& builtinScenarios();

/// The parsed scenario, or nullptr-like empty optional when `name` is not built in.
bool isBuiltinScenario(std::string_view name);
Scenario builtinScenario(std::string_view name);

}  // namespace ddph
