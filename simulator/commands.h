#pragma once
// The subcommands of ddp-sim. Each adds itself to the CLI11 app and, when the command line
// selects it, runs and returns an exit code (ddph::ExitCode).

#include <CLI/CLI.hpp>

#include <functional>

namespace ddph::sim {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command addSamplerCommand(CLI::App& app);
Command addCheckSamplerCommand(CLI::App& app);
Command addLaunchCommand(CLI::App& app);
Command addRankSelfTestCommand(CLI::App& app);
Command addRankRunCommand(CLI::App& app);
Command addRunCommand(CLI::App& app);
Command addScenariosCommand(CLI::App& app);

}  // namespace ddph::sim
