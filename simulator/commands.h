#pragma once
// The subcommands of ddp-sim. Each adds itself to the CLI11 app and, when the command line
// selects it, runs and returns an exit code (ddph::common::ExitCode).

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddph::sim {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// What each exit code means for one subcommand: every --help ends with the same footer,
/// "Exit codes: 0 …, 1 …, 2 …, 3 …[, 128+N …]." (exitCodesFooter). Empty `interrupted`: the
/// command has no 128+N of its own.
struct ExitCodes {
  std::string ok, violation, usage, runtime;
  std::string interrupted;
};
std::string exitCodesFooter(const ExitCodes& codes);

/// Sets up `app` as ddp-sim (version, footer, one subcommand required) and adds every command;
/// parsing argv into it runs nothing (simulator/app.cpp).
std::vector<Command> addCommands(CLI::App& app);

Command addSamplerCommand(CLI::App& app);
Command addCheckSamplerCommand(CLI::App& app);
Command addLaunchCommand(CLI::App& app);
Command addRankSelfTestCommand(CLI::App& app);
Command addRankRunCommand(CLI::App& app);
Command addRunCommand(CLI::App& app);
Command addScenariosCommand(CLI::App& app);
Command addAuditCommand(CLI::App& app);

/// Throws ConfigError (one line) unless the report and the page can be written (their folders
/// exist and take a new file): checked before a run or an audit starts.
void checkAuditOutputs(const std::optional<std::string>& reportPath,
                       const std::optional<std::string>& htmlPath);

/// Reads and audits the trace folders of one run (a job's nodes, the jobs resumed one from
/// another: trace::readRun), prints the summary (unless quiet), then writes the JSON report and
/// the HTML page (of the last job); returns kExitOk or kExitViolation, or kExitRuntime when a file
/// could not be written (one line "TOOL: error: cannot write '…': …" on stderr, the verdict
/// printed all the same). Throws ConfigError for an unreadable trace or folders of different runs.
int auditTraceFolders(const std::vector<std::filesystem::path>& dirs,
                      const std::optional<std::string>& reportPath, bool quiet,
                      const std::optional<std::string>& htmlPath = std::nullopt,
                      std::string_view tool = "ddp-sim");

/// The folder holding the Python packages (ddph_audit, ddph_launch): $DDPH_AUDIT_PYTHONPATH, else
/// the installed share/ddph/python beside this executable, else this source tree's python/.
std::filesystem::path pythonPackageDir();

/// What every rank of `ddp-sim launch --audit` gets: DDPH_AUDIT_DIR, DDPH_AUDIT_RUN_ID and the
/// recorder's folders at the head of PYTHONPATH (its sitecustomize loads it into Python ranks).
std::vector<std::pair<std::string, std::string>> auditEnvironment(const std::filesystem::path& traceDir);

/// What every rank of `ddp-sim launch --cpu` / `--stand-in-data` gets: DDPH_CPU=1 and
/// DDPH_CPU_GPUS=`gpus` (when gpus > 0), DDPH_STAND_IN_DATA=1 and DDPH_MNIST_DIR (with
/// `standInData`) and, unless auditEnvironment already put them there, the recorder's folders on
/// PYTHONPATH.
std::vector<std::pair<std::string, std::string>> cpuEmulationEnvironment(int gpus, bool standInData,
                                                                         bool withPythonPath);

}  // namespace ddph::sim
