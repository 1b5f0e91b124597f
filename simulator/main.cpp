// ddp-sim: reproduce and diagnose distributed data-loading bugs on one machine.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <vector>

#include "commands.h"
#include "ddph/common/command_line.h"
#include "ddph/common/error.h"

int main(int argc, char** argv) {
  CLI::App app{"ddp-sim: reproduce and diagnose distributed data-parallel bugs on one machine",
               "ddp-sim"};
  const std::vector<ddph::sim::Command> commands = ddph::sim::addCommands(app);

  if (const auto exitCode = ddph::common::parseCommandLine(app, argc, argv, "ddp-sim"))
    return *exitCode;

  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
    return ddph::common::kExitUsage;
  } catch (const ddph::common::ConfigError& e) {
    fmt::print(stderr, "ddp-sim: error: {}\n", e.what());
    return ddph::common::kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ddp-sim: internal error: {}\n", e.what());
    return ddph::common::kExitRuntime;
  }
}
