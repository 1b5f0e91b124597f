// ddp-sim run: a scenario on W real Gloo rank processes, diagnosed.
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.h"
#include "ddph/common/timeouts.h"
#include "ddph/common/error.h"
#include "ddph/common/progress_line.h"
#include "ddph/sampler/property.h"
#include "ddph/common/atomic_file.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/trace/launch_record.h"
#include "ddph/trace/trace.h"
#include "ddph/report/html_report.h"
#include "ddph/scenario/run_page.h"
#include "ddph/scenario/run_report.h"
#include "ddph/scenario/builtin_scenarios.h"
#include "ddph/scenario/scenario_file.h"
#include "ddph/scenario/scenario_runner.h"

namespace ddph::sim {

using common::checkTimeoutOption;
using common::ConfigError;
using common::kExitOk;
using common::kExitViolation;
using common::ProgressLine;
using common::writeFileAtomically;

namespace {

struct RunArgs {
  std::string scenario;
  std::optional<int> worldSize;
  std::optional<std::string> reportPath;
  std::optional<std::string> htmlPath;
  std::optional<std::string> traceDir;
  std::optional<double> deadlineS;
  bool quiet = false;
};

int runRun(const RunArgs& a) {
  DDPH_CHECK(!a.worldSize || *a.worldSize >= 1, "-n must be at least 1, got {}",
             a.worldSize.value_or(0));
  if (a.deadlineS) checkTimeoutOption("--timeout", *a.deadlineS);
  scenario::RunOptions options;
  options.worldSize = a.worldSize;  // runScenario applies and validates it
  options.deadlineS = a.deadlineS;
  options.gloo = comm::glooOptionsFromEnvironment();
  checkAuditOutputs(a.reportPath, a.htmlPath);
  if (a.traceDir) common::checkWritableFolder(*a.traceDir, "trace");
  // Every run's ranks write their trace (ScenarioTrace), which the audit judges rank failures on:
  // into --trace-dir (kept, for `ddp-sim audit`), else a private folder removed at the end.
  const trace::TraceFolder traces(a.traceDir);
  options.trace = {traces.path(), fmt::format("run-{}", ::getpid())};
  scenario::Scenario scenario = scenario::resolveScenario(a.scenario);
  if (a.worldSize) scenario.worldSize = *a.worldSize;
  scenario::validateScenario(scenario);
  // On a terminal: ranks joined, epochs done, elapsed (nothing when stderr is a log or a pipe).
  std::optional<scenario::RunProgress> shown;
  if (::isatty(STDERR_FILENO) != 0) shown.emplace(scenario.worldSize);
  const auto start = std::chrono::steady_clock::now();
  ProgressLine progress(STDERR_FILENO, [&] {
    return fmt::format("ddp-sim run {}: {} of {} ranks joined, {} of {} epochs done, {}", scenario.name,
                       shown->joinedRanks(), scenario.worldSize, shown->epochsDone(), scenario.epochs,
                       ProgressLine::formatElapsed(std::chrono::steady_clock::now() - start));
  });
  if (progress.active()) options.progress = &*shown;
  const scenario::RunReport report = scenario::runScenario(scenario, options);
  progress.stop();
  // The verdict first: a file that cannot be written at the end costs the file, not the verdict.
  if (!a.quiet) std::cout << scenario::reportText(report) << std::flush;
  bool written = true;
  const auto write = [&](const auto& writeIt) {
    try {
      writeIt();
    } catch (const common::Error& e) {
      fmt::print(stderr, "ddp-sim run: error: {}\n", e.what());
      written = false;
    }
  };
  if (a.reportPath) write([&] { writeFileAtomically(*a.reportPath, scenario::reportJson(report)); });
  if (a.htmlPath) {
    std::optional<trace::Trace> trace;
    try {
      trace = trace::readTrace(traces.path());
    } catch (const ConfigError&) {
      // A run stopped before any rank wrote its trace: the page says so (runPage's note).
    }
    write([&] {
      report::writeHtmlReport(*a.htmlPath, scenario::runPage(report, trace ? &*trace : nullptr, scenario));
    });
  }
  if (report.interruptedBy != 0) {
    fmt::print(stderr, "ddp-sim run: interrupted by signal {}; every rank was stopped\n",
               report.interruptedBy);
    return 128 + report.interruptedBy;
  }
  if (!written) return common::kExitRuntime;
  return report.passed ? kExitOk : kExitViolation;
}

}  // namespace

Command addRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand(
      "run", "Run a scenario (built-in name or TOML file) on W real Gloo rank processes and "
             "diagnose it");
  sub->add_option("scenario", args->scenario, "built-in scenario name or scenario file")
      ->required();
  sub->add_option("-n,--world-size", args->worldSize, "number of ranks (overrides the scenario)");
  sub->add_option("--report", args->reportPath, "write the JSON report here");
  sub->add_option("--html", args->htmlPath,
                  "also write a self-contained HTML report here (verdict, coverage, rank timeline; "
                  "docs/html-report.md)");
  sub->add_option("--trace-dir", args->traceDir,
                  "keep the ranks' audit trace in this folder (created; refused when it already "
                  "holds a trace), for ddp-sim audit");
  sub->add_option("--timeout", args->deadlineS,
                  "seconds before the whole run is stopped (every collective also has the "
                  "scenario's timeout_s)");
  sub->add_flag("-q,--quiet", args->quiet, "no summary on stdout");
  sub->footer(exitCodesFooter(
      {"passed", "a property was violated (or a rank failed)",
       "bad arguments or scenario (or an unwritable --report/--html/--trace-dir path: nothing run)",
       "a report that could not be written at the end (the verdict is printed all the same) or an "
       "internal error",
       "interrupted by signal N"}));
  return {sub, [args] { return runRun(*args); }};
}

}  // namespace ddph::sim
