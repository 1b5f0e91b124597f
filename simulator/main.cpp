// ddp-sim: reproduce and diagnose distributed data-loading bugs on one machine.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <vector>

#include "commands.h"
#include "ddph/common/command_line.h"
#include "ddph/common/error.h"
#include "ddph/config.h"

int main(int argc, char** argv) {
  CLI::App app{"ddp-sim: reproduce and diagnose distributed data-parallel bugs on one machine",
               "ddp-sim"};
  app.set_version_flag("--version", std::string("ddp-sim ") + DDPH_VERSION + " (LibTorch " +
                                        DDPH_TORCH_VERSION + ")");
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 passed, 1 a property was violated, 2 bad arguments or input, 3 internal "
      "error.");

  const std::vector<ddph::sim::Command> commands = {
      ddph::sim::addSamplerCommand(app),
      ddph::sim::addCheckSamplerCommand(app),
      ddph::sim::addLaunchCommand(app),
      ddph::sim::addRankSelfTestCommand(app),
      ddph::sim::addRankRunCommand(app),
      ddph::sim::addRunCommand(app),
      ddph::sim::addScenariosCommand(app),
      ddph::sim::addAuditCommand(app),
  };

  if (const auto exitCode = ddph::parseCommandLine(app, argc, argv, "ddp-sim")) return *exitCode;

  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
    return ddph::kExitUsage;
  } catch (const ddph::ConfigError& e) {
    fmt::print(stderr, "ddp-sim: error: {}\n", e.what());
    return ddph::kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ddp-sim: internal error: {}\n", e.what());
    return ddph::kExitRuntime;
  }
}
