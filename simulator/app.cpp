// The ddp-sim command line: the app's version, footer and every subcommand, built in one place for
// main.cpp and for the argument fuzzer (fuzz/ddp_sim_args_fuzz.cpp), which parses without running.
#include <string>
#include <vector>

#include "commands.h"
#include "ddph/config.h"

namespace ddph::sim {

std::vector<Command> addCommands(CLI::App& app) {
  app.set_version_flag("--version", std::string("ddp-sim ") + DDPH_VERSION + " (LibTorch " +
                                        DDPH_TORCH_VERSION + ")");
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 passed, 1 a property was violated, 2 bad arguments or input, 3 internal "
      "error.");
  return {
      addSamplerCommand(app),
      addCheckSamplerCommand(app),
      addLaunchCommand(app),
      addRankSelfTestCommand(app),
      addRankRunCommand(app),
      addRunCommand(app),
      addScenariosCommand(app),
      addAuditCommand(app),
  };
}

}  // namespace ddph::sim
