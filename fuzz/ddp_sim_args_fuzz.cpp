// Fuzz target: ddp-sim's command line, every subcommand's options (simulator/app.cpp), parsed the
// way main does but never run. The input is the arguments, one a line. CLI11's ParseError (help
// and version included) is the expected verdict on a bad command line.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "commands.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = ddph::fuzz::argumentsOf(data, size, "ddp-sim");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  CLI::App app{"ddp-sim", "ddp-sim"};
  const std::vector<ddph::sim::Command> commands = ddph::sim::addCommands(app);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return 0;
  }
  // A command line that parsed selects exactly one command (require_subcommand(1)).
  int selected = 0;
  for (const auto& command : commands) selected += command.app->parsed() ? 1 : 0;
  if (selected != 1) __builtin_trap();
  return 0;
}
