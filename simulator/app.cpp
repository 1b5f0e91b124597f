// The ddp-sim command line: the app's version, footer and every subcommand, built in one place for
// main.cpp and for the argument fuzzer (fuzz/ddp_sim_args_fuzz.cpp), which parses without running.
#include <string>
#include <vector>

#include "commands.h"
#include "ddph/config.h"

namespace ddph::sim {

std::string exitCodesFooter(const ExitCodes& codes) {
  std::string footer = "Exit codes: 0 " + codes.ok + ", 1 " + codes.violation + ", 2 " + codes.usage +
                       ", 3 " + codes.runtime;
  if (!codes.interrupted.empty()) footer += ", 128+N " + codes.interrupted;
  return footer + ".";
}

std::vector<Command> addCommands(CLI::App& app) {
  app.set_version_flag("--version", std::string("ddp-sim ") + DDPH_VERSION + " (LibTorch " +
                                        DDPH_TORCH_VERSION + ")");
  app.require_subcommand(1);
  app.footer(exitCodesFooter(
      {"passed", "a property was violated (or a rank failed)",
       "bad arguments or input (one line, nothing run)",
       "a report that could not be written at the end (the verdict is printed all the same) or "
       "an internal error",
       "interrupted by signal N (launch, run); each subcommand's --help says what its codes mean"}));
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
