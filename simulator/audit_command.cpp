// ddp-sim audit: the properties judged on the trace of a real run (docs/audit.md).
// Also the audit half of `ddp-sim launch --audit` (auditTraceFolder, auditEnvironment).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>

#include "commands.h"
#include "ddph/audit/audit.h"
#include "ddph/audit/audit_page.h"
#include "ddph/trace/trace.h"
#include "ddph/common/atomic_file.h"
#include "ddph/common/environment.h"
#include "ddph/common/error.h"
#include "ddph/report/html_report.h"

namespace ddph::sim {

using common::kExitOk;
using common::kExitRuntime;
using common::kExitViolation;
using common::writeFileAtomically;

namespace fs = std::filesystem;
namespace {

struct AuditArgs {
  std::vector<std::string> traceDirs;
  std::optional<std::string> reportPath;
  std::optional<std::string> htmlPath;
  bool quiet = false;
};

std::string randomRunId() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}", device(), device());
}

// The recorder's sitecustomize folder and package folder ahead of the user's PYTHONPATH.
std::string recorderPythonPath() {
  const fs::path package = pythonPackageDir();
  DDPH_CHECK(fs::exists(package / "ddph_audit" / "__init__.py"),
             "the Python recorder ddph_audit is not in '{}' (set DDPH_AUDIT_PYTHONPATH to the folder "
             "holding it)",
             package.string());
  std::string pythonPath = (package / "ddph_audit" / "_sitecustomize").string() + ":" + package.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) pythonPath += std::string(":") + old;
  return pythonPath;
}

}  // namespace

// The folder holding the Python package ddph_audit: $DDPH_AUDIT_PYTHONPATH, else the installed
// share/ddph/python beside this executable, else this source tree's python/.
fs::path pythonPackageDir() {
  if (const char* explicitDir = std::getenv(common::env::kAuditPythonPath); explicitDir && *explicitDir) {
    return explicitDir;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "ddph" / "python";
    if (fs::exists(installed / "ddph_audit" / "__init__.py", ec)) return installed;
  }
  return DDPH_PYTHON_PACKAGE_DIR;
}

std::vector<std::pair<std::string, std::string>> auditEnvironment(const fs::path& traceDir) {
  return {{common::env::kAuditDir, fs::absolute(traceDir).string()},
          {common::env::kAuditRunId, randomRunId()},
          {"PYTHONPATH", recorderPythonPath()}};
}

std::vector<std::pair<std::string, std::string>> cpuEmulationEnvironment(int gpus, bool standInData,
                                                                         bool withPythonPath) {
  std::vector<std::pair<std::string, std::string>> env;
  if (gpus > 0) {
    env.emplace_back(common::env::kCpu, "1");
    env.emplace_back(common::env::kCpuGpus, std::to_string(gpus));
  }
  if (standInData) {
    env.emplace_back(common::env::kStandInData, "1");
    // The MNIST files scripts/fetch-mnist.sh fetches: $DDPH_MNIST_DIR, else this tree's data/mnist.
    const char* mnist = std::getenv(common::env::kMnistDir);
    env.emplace_back(common::env::kMnistDir, mnist && *mnist ? mnist : DDPH_DEFAULT_MNIST_DIR);
  }
  if (withPythonPath) env.emplace_back("PYTHONPATH", recorderPythonPath());
  return env;
}

void checkAuditOutputs(const std::optional<std::string>& reportPath,
                       const std::optional<std::string>& htmlPath) {
  if (reportPath) common::checkWritableFile(*reportPath, "JSON report");
  if (htmlPath) common::checkWritableFile(*htmlPath, "HTML report");
}

int auditTraceFolders(const std::vector<fs::path>& dirs, const std::optional<std::string>& reportPath,
                      bool quiet, const std::optional<std::string>& htmlPath, std::string_view tool) {
  const std::vector<trace::Trace> jobs = trace::readRun(dirs);
  const audit::AuditReport report = audit::auditRun(jobs);
  // The verdict first: a file that cannot be written at the end (checked before the run, but a
  // disk fills, a folder goes) costs the file, never the verdict (exit 3).
  if (!quiet) std::cout << audit::auditReportText(report) << std::flush;
  int exitCode = report.passed ? kExitOk : kExitViolation;
  const auto write = [&](const auto& writeIt) {
    try {
      writeIt();
    } catch (const common::Error& e) {
      fmt::print(stderr, "{}: error: {}\n", tool, e.what());
      exitCode = kExitRuntime;
    }
  };
  if (reportPath) {
    write([&] { writeFileAtomically(*reportPath, audit::auditReportJson(report)); });
  }
  if (htmlPath) {
    write([&] { report::writeHtmlReport(*htmlPath, audit::auditPage(jobs.back(), report)); });
  }
  return exitCode;
}

Command addAuditCommand(CLI::App& app) {
  auto args = std::make_shared<AuditArgs>();
  CLI::App* sub = app.add_subcommand(
      "audit", "Check the trace of a real run (ddp-sim launch --audit, or python3 -m ddph_audit "
               "under torchrun) against the data and collective properties");
  sub->add_option("trace_dir", args->traceDirs,
                  "the trace folder (rank-<R>.jsonl files; after a torchrun restart, its "
                  "attempt-<K>/ folder for attempt K); several folders of one run: its nodes' "
                  "folders (one per torchrun agent), and the folders of jobs resumed one from "
                  "another, in the order they ran (docs/audit.md, \"A run of several jobs\")")
      ->required();
  sub->add_option("--report", args->reportPath, "also write the report as JSON here (atomically)");
  sub->add_option("--html", args->htmlPath,
                  "also write a self-contained HTML report here (verdict, coverage, rank timeline; "
                  "docs/html-report.md)");
  sub->add_flag("-q,--quiet", args->quiet, "print nothing; the exit code tells");
  sub->footer(exitCodesFooter(
      {"no finding", "a property was violated",
       "bad arguments, an unreadable trace (one line naming the file and line) or a report path "
       "that cannot be written (nothing audited)",
       "a report that could not be written at the end (the verdict is printed all the same) or an "
       "internal error",
       ""}));
  return {sub, [args] {
            checkAuditOutputs(args->reportPath, args->htmlPath);
            return auditTraceFolders({args->traceDirs.begin(), args->traceDirs.end()},
                                     args->reportPath, args->quiet, args->htmlPath);
          }};
}

}  // namespace ddph::sim
