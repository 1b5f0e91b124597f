#pragma once
// The built-in catalogue: each entry reproduces a classic distributed data bug (or none, for
// `healthy`) and names the property that diagnoses it.

#include <string>
#include <string_view>
#include <vector>

#include "ddph/scenario/scenario.h"

namespace ddph::scenario {

struct BuiltinScenario {
  std::string_view name;
  std::string_view toml;  ///< the scenario, in the scenario file format
};

const std::vector<BuiltinScenario>& builtinScenarios();

bool isBuiltinScenario(std::string_view name);
/// The parsed built-in scenario; ConfigError when `name` is not built in.
Scenario builtinScenario(std::string_view name);

/// What every command that takes a SCENARIO argument (`run`, `rank-run`) means by it: a file that
/// exists wins, else a built-in name; ConfigError naming both when it is neither.
Scenario resolveScenario(const std::string& nameOrPath);

}  // namespace ddph::scenario
