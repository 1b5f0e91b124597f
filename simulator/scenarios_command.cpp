// ddp-sim scenarios: the built-in catalogue, or one scenario's TOML.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "ddph/common/error.h"
#include "ddph/scenario/builtin_scenarios.h"
#include "ddph/scenario/scenario_file.h"

namespace ddph::sim {

using common::ConfigError;
using common::kExitOk;

namespace {

int runScenarios(const std::string& show) {
  if (!show.empty()) {
    for (const auto& b : scenario::builtinScenarios()) {
      if (b.name == show) {
        std::cout << b.toml;
        return kExitOk;
      }
    }
    throw ConfigError(fmt::format("no built-in scenario '{}'", show));
  }
  for (const auto& b : scenario::builtinScenarios()) {
    const scenario::Scenario s = scenario::builtinScenario(b.name);
    fmt::print("{:<24} {:<20} {}\n", s.name, s.expect.empty() ? "(passes)" : s.expect,
               s.description);
  }
  return kExitOk;
}

}  // namespace

Command addScenariosCommand(CLI::App& app) {
  auto show = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("scenarios", "List the built-in scenarios");
  sub->add_option("--show", *show, "print this scenario's TOML");
  sub->footer(exitCodesFooter({"listed or shown", "(not used)", "an unknown scenario (one line)",
                               "an internal error", ""}));
  return {sub, [show] { return runScenarios(*show); }};
}

}  // namespace ddph::sim
