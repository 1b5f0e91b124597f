// ddp-sim launch: a torchrun-compatible launcher for CPU ranks.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <streambuf>
#include <memory>
#include <optional>

#include "commands.h"
#include "ddph/common/timeouts.h"
#include "ddph/trace/launch_record.h"
#include "ddph/common/error.h"
#include "ddph/common/progress_line.h"
#include "ddph/trace/trace_progress.h"
#include "ddph/trace/work_done.h"
#include "ddph/launch/python_program.h"
#include "ddph/launch/launcher.h"
#include "ddph/launch/nodes.h"
#include "ddph/launch/world_size.h"
#include "ddph/common/atomic_file.h"
#include "ddph/common/child_process.h"
#include "ddph/report/html_report.h"

namespace ddph::sim {

using common::checkTimeoutOption;
using common::ConfigError;
using common::kExitOk;
using common::kExitRuntime;
using common::kExitUsage;
using common::kExitViolation;
using common::ProgressLine;

namespace {

const char* outcomeName(launch::RankOutcome::Kind kind) {
  switch (kind) {
    case launch::RankOutcome::Kind::kRunning:
      return "running";
    case launch::RankOutcome::Kind::kExited:
      return "exited";
    case launch::RankOutcome::Kind::kSignaled:
      return "signaled";
    case launch::RankOutcome::Kind::kTimedOut:
      return "timed-out";
    case launch::RankOutcome::Kind::kStopped:
      return "stopped";
    case launch::RankOutcome::Kind::kHungAtExit:
      return "hung-at-exit";
  }
  return "running";
}

// How `ddp-sim launch` saw its ranks end (launch.json); `deadlineS` its --timeout, when it had one.
trace::LaunchRecord launchRecordOf(const launch::LaunchResult& result, int worldSize,
                            std::optional<double> deadlineS) {
  trace::LaunchRecord record;
  record.launcher = "ddp-sim launch";
  record.worldSize = worldSize;
  record.exitCode = result.exitCode;
  record.timedOut = result.failure && result.failure->kind == launch::RankOutcome::Kind::kTimedOut;
  record.deadlineS = deadlineS;
  record.interruptedBy = result.interruptedBy;
  for (const auto& r : result.ranks) {
    launch::RankOutcome::Kind kind = r.kind;
    // A timeout stops every rank: those still running then are the hung ones.
    if (record.timedOut && kind == launch::RankOutcome::Kind::kStopped)
      kind = launch::RankOutcome::Kind::kTimedOut;
    record.ranks.push_back({r.rank, r.pid, outcomeName(kind), r.code, r.signal, r.wasStopped});
  }
  return record;
}

struct LaunchArgs {
  int numRanks = 1;  ///< -n: the ranks of the one node, or of each node with --nnodes
  std::optional<int> nnodes;
  bool slurm = false;
  std::optional<double> timeoutS;
  double graceS = 3.0;
  int masterPort = 0;
  std::vector<std::string> command;
  bool audit = false;
  std::optional<std::string> traceDir;
  std::vector<std::string> resumes;  ///< the trace folders of the jobs this one resumes, in order
  std::optional<std::string> reportPath;
  std::optional<std::string> htmlPath;
  bool cpu = false;
  std::optional<int> gpus;
  bool standInData = false;
  bool exec = false;
};

std::chrono::milliseconds seconds(double s) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000.0));
}

// The ranks' output lines, printed above the progress line: the launcher writes a line and
// flushes, and the flush prints it with the progress line out of the way.
class AboveProgress final : public std::streambuf {
 public:
  AboveProgress(ProgressLine& line, std::FILE* file) : line_(line), file_(file) {}

 protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) pending_.push_back(static_cast<char>(c));
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    pending_.append(s, static_cast<std::size_t>(n));
    return n;
  }
  int sync() override {
    if (pending_.empty()) return 0;
    line_.printAbove([this] {
      std::fwrite(pending_.data(), 1, pending_.size(), file_);
      std::fflush(file_);
    });
    pending_.clear();
    return 0;
  }

 private:
  ProgressLine& line_;
  std::FILE* file_;
  std::string pending_;
};

// How many ranks the launcher stopped itself (SIGTERM, then SIGKILL) when it was interrupted.
int stoppedRanks(const launch::LaunchResult& result) {
  int n = 0;
  for (const auto& r : result.ranks) n += r.kind == launch::RankOutcome::Kind::kStopped ? 1 : 0;
  return n;
}

// --nnodes N (or --slurm, one node): N emulated nodes of -n ranks each (docs/multi-node.md).
std::optional<launch::NodeLayout> nodeLayoutOf(const LaunchArgs& a) {
  if (!a.nnodes && !a.slurm) return std::nullopt;
  launch::NodeLayout layout;
  layout.nodes = a.nnodes.value_or(1);
  layout.perNode = a.numRanks;
  layout.slurm = a.slurm;
  return layout;
}

// Everything that would fail W ranks alike, or end a long run in a file it cannot write, checked
// before any rank starts: one line, exit 2. The world size.
int checkLaunchArgs(const LaunchArgs& a, const std::optional<launch::NodeLayout>& nodes) {
  if (nodes) {
    launch::checkNodeWorldSize(a.command, nodes->nodes, nodes->perNode);
  } else {
    launch::checkWorldSize(a.command, a.numRanks);
  }
  if (a.timeoutS) checkTimeoutOption("--timeout", *a.timeoutS);
  if (a.graceS != 0) checkTimeoutOption("--grace", a.graceS);  // 0: SIGKILL at once
  DDPH_CHECK(a.masterPort >= 0 && a.masterPort < 65536, "--master-port {} is not a port",
             a.masterPort);
  DDPH_CHECK(a.audit || (!a.traceDir && !a.reportPath && !a.htmlPath && a.resumes.empty()),
             "--trace-dir, --report, --html and --resumes need --audit");
  // The earlier jobs' traces are read before any rank starts: a wrong folder is one line, exit 2.
  if (!a.resumes.empty()) {
    trace::readRun({a.resumes.begin(), a.resumes.end()});
  }
  checkAuditOutputs(a.reportPath, a.htmlPath);
  if (a.traceDir) common::checkWritableFolder(*a.traceDir, "trace");
  DDPH_CHECK(a.cpu || !a.gpus, "--gpus needs --cpu");
  DDPH_CHECK(!a.gpus || (*a.gpus > 0 && *a.gpus <= 4096), "--gpus {} is not between 1 and 4096",
             a.gpus.value_or(0));
  // Before W ranks fail alike: a missing script, one that does not compile, an interpreter
  // without torch (exit 2).
  launch::checkPythonProgram(a.command, /*needsTorch=*/a.audit || a.cpu);
  return nodes ? nodes->worldSize() : a.numRanks;
}

// The launcher's options: the ranks, how they start, and the environment the audit and the
// emulation add to each (`traceDir`: the trace folder, with --audit).
launch::LaunchOptions launchOptions(const LaunchArgs& a, const std::optional<launch::NodeLayout>& nodes,
                                    int worldSize, const std::filesystem::path* traceDir) {
  launch::LaunchOptions options;
  options.numRanks = worldSize;
  options.nodes = nodes;
  options.command = a.command;
  if (a.timeoutS) options.timeout = seconds(*a.timeoutS);
  options.grace = seconds(a.graceS);
  options.masterPort = static_cast<std::uint16_t>(a.masterPort);
  options.retryTakenPort = a.masterPort == 0;  // a port the user chose stays theirs
  // A Python program's ranks are forked from one interpreter that imported torch once, unless
  // --exec (docs/ddp-sim.md, "How ranks start").
  if (!a.exec) options.forkServer = (pythonPackageDir() / "ddph_launch" / "fork_server.py").string();
  if (traceDir) options.extraEnv = auditEnvironment(*traceDir);
  // Emulated nodes need the sitecustomize too (each node's host name and Gloo address).
  if (a.cpu || a.standInData || nodes) {
    const auto cpu = cpuEmulationEnvironment(a.cpu ? a.gpus.value_or(a.numRanks) : 0,
                                             a.standInData, /*withPythonPath=*/!a.audit);
    options.extraEnv.insert(options.extraEnv.end(), cpu.begin(), cpu.end());
  }
  // As torchrun does: ranks that share the cores get one intra-op thread each, unless the user
  // set OMP_NUM_THREADS.
  if ((worldSize > 1 || a.cpu) && !std::getenv("OMP_NUM_THREADS")) {
    options.extraEnv.emplace_back("OMP_NUM_THREADS", "1");
  }
  return options;
}

// The launcher's last line: the summary, the user's own stop and where the run was, or the error.
void printLaunchEnd(const launch::LaunchResult& result, const std::string& elapsed,
                    std::optional<trace::TraceProgress>& traced, int worldSize) {
  if (result.exitCode == 0) {
    fmt::print(stderr, "ddp-sim launch: {}\n", result.summary);
  } else if (result.interruptedBy != 0) {
    // The user's own stop: one line saying where the run was, not an error of the ranks'.
    std::string where = elapsed;
    if (traced) {
      const auto counts = traced->read();
      where += fmt::format(" ({} of {} ranks past a collective, {} epoch{} done)", counts.joined,
                           worldSize, counts.epochsDone, counts.epochsDone == 1 ? "" : "s");
    }
    const int stopped = stoppedRanks(result);
    fmt::print(stderr, "ddp-sim launch: interrupted by {}: stopped {} rank{} at {}\n",
               common::signalName(result.interruptedBy), stopped, stopped == 1 ? "" : "s", where);
  } else {
    fmt::print(stderr, "ddp-sim launch: error: {}\n", result.summary);
  }
}

// launch.json written beside the ranks' trace, then the audit of the run (with the jobs it
// resumed): the exit code of `ddp-sim launch --audit`.
int auditLaunched(const LaunchArgs& a, const launch::LaunchResult& result, int worldSize,
                  const std::filesystem::path& traceDir) {
  trace::LaunchRecord record = launchRecordOf(result, worldSize, a.timeoutS);
  record.command = a.command;  // the audit's hints repeat it (the user's own interpreter)
  record.cpu = a.cpu;
  record.gpus = a.gpus;
  record.standInData = a.standInData;
  record.hashDependence = result.hashDependence;
  trace::writeLaunchRecord(traceDir, record);
  int audited = kExitOk;
  try {
    std::vector<std::filesystem::path> run(a.resumes.begin(), a.resumes.end());
    run.push_back(traceDir);
    audited = auditTraceFolders(run, a.reportPath, /*quiet=*/false, a.htmlPath, "ddp-sim launch");
  } catch (const ConfigError& e) {
    fmt::print(stderr, "ddp-sim launch: error: cannot audit the run: {}\n", e.what());
    return result.interruptedBy != 0 ? result.exitCode : kExitUsage;
  }
  if (result.interruptedBy != 0) return result.exitCode;  // 128 + N, after the audit
  if (audited == kExitRuntime) return kExitRuntime;       // a report it could not write
  return audited == kExitOk && result.exitCode == 0 ? kExitOk : kExitViolation;
}

int runLaunch(const LaunchArgs& a) {
  const std::optional<launch::NodeLayout> nodes = nodeLayoutOf(a);
  const int worldSize = checkLaunchArgs(a, nodes);
  std::optional<trace::TraceFolder> traces;
  if (a.audit) traces.emplace(a.traceDir);
  launch::LaunchOptions options = launchOptions(a, nodes, worldSize, traces ? &traces->path() : nullptr);
  // On a terminal: ranks running, (with --audit) joined and epochs done, elapsed; nothing when
  // stderr is a log or a pipe.
  std::optional<trace::TraceProgress> traced;
  if (traces) traced.emplace(traces->path(), worldSize);
  const auto start = std::chrono::steady_clock::now();
  // The supervisor's count: a forked rank is the fork server's child, not this process's.
  std::atomic<int> running{0};
  options.running = &running;
  ProgressLine progress(STDERR_FILENO, [&] {
    std::string line = fmt::format("ddp-sim launch: {} of {} ranks running", running.load(), worldSize);
    if (traced) {
      const auto counts = traced->read();
      line += fmt::format(", {} joined, {} epochs done", counts.joined, counts.epochsDone);
    }
    return line + ", " + ProgressLine::formatElapsed(std::chrono::steady_clock::now() - start);
  });
  AboveProgress outBuffer(progress, stdout), errBuffer(progress, stderr);
  std::ostream out(&outBuffer), err(&errBuffer);
  if (progress.active()) {
    options.out = &out;
    options.err = &err;
  }
  options.note = [&](const std::string& line) { err << "ddp-sim launch: " << line << '\n' << std::flush; };
  // A rank whose trace says its work is done and that hangs at exit is ended, not waited for
  // (NOTE [Hung at exit], docs/ddp-sim.md "A rank that hangs at exit").
  std::optional<trace::WorkDone> workDone;
  if (traces) {
    workDone.emplace(traces->path(), worldSize);
    options.workDone = [&workDone](int r, long pid) { return (*workDone)(r, pid); };
    options.beforeRetry = [&] {
      traces->clear();
      workDone.emplace(traces->path(), worldSize);
    };
  }
  const launch::LaunchResult result = launch::launchRanks(options);
  progress.stop();
  std::cout << std::flush;
  printLaunchEnd(result, ProgressLine::formatElapsed(std::chrono::steady_clock::now() - start),
                 traced, worldSize);
  if (!traces) return result.exitCode;
  return auditLaunched(a, result, worldSize, traces->path());
}

}  // namespace

Command addLaunchCommand(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* sub = app.add_subcommand(
      "launch", "Run W CPU rank processes of a command, torchrun-style (RANK, WORLD_SIZE, "
                "MASTER_ADDR, MASTER_PORT, …); stop all if one fails");
  sub->add_option("-n,--nproc-per-node", args->numRanks,
                  "number of ranks W (with --nnodes: ranks per node M, W = N x M)")
      ->required();
  sub->add_option("--nnodes", args->nnodes,
                  "emulate N nodes of -n ranks each (docs/multi-node.md): torchrun's per-node "
                  "variables (RANK = node x M + LOCAL_RANK, GROUP_RANK, …; not NODE_RANK, as torchrun), a loopback "
                  "address (node k: 127.1.0.<k+1>, node 0's also MASTER_ADDR) and host name "
                  "(node<k>) per node");
  sub->add_flag("--slurm", args->slurm,
                "also give every rank a SLURM step's variables (SLURM_PROCID, SLURM_LOCALID, "
                "SLURM_NODEID, SLURM_NTASKS, SLURM_JOB_NODELIST, …), as srun does");
  sub->add_option("--timeout", args->timeoutS, "seconds before every rank is stopped (default: none)");
  sub->add_option("--grace", args->graceS, "seconds between SIGTERM and SIGKILL when stopping")
      ->capture_default_str();
  sub->add_option("--master-port", args->masterPort, "MASTER_PORT (0: a free port)")
      ->capture_default_str();
  sub->add_flag("--audit", args->audit,
                "watch the ranks (Python torch programs through the ddph_audit recorder, C++ ones "
                "through DDPH_AUDIT_DIR) and audit their trace when they end");
  sub->add_option("--trace-dir", args->traceDir,
                  "with --audit: keep the trace in this folder (default: a temporary one)");
  sub->add_option("--resumes", args->resumes,
                  "with --audit: this job resumes the job traced in this folder (repeat it for "
                  "each earlier job, in the order they ran): the audit judges them as one run, an "
                  "epoch the earlier job ended inside finished exactly once by this one "
                  "(docs/audit.md, \"A run of several jobs\")")
      ->allow_extra_args(false);
  sub->add_option("--report", args->reportPath, "with --audit: write the audit report as JSON here");
  sub->add_option("--html", args->htmlPath,
                  "with --audit: write a self-contained HTML report here (docs/html-report.md)");
  sub->add_flag("--cpu", args->cpu,
                "serve the CUDA face of torch from the CPU in every Python rank: nccl runs on gloo, "
                "cuda devices are the CPU (docs/cpu-emulation.md)");
  sub->add_option("--gpus", args->gpus,
                  "with --cpu: the stand-in devices per node torch.cuda.device_count() reports "
                  "(default: -n, the ranks per node)");
  sub->add_flag("--stand-in-data", args->standInData,
                "serve torchvision's MNIST (the harness's files), CIFAR-10/100 and FashionMNIST "
                "(stand-ins with the real lengths and classes) without downloading");
  sub->add_flag("--exec", args->exec,
                "start every rank as its own process (exec) even for a Python program, whose ranks "
                "are otherwise forked from one interpreter that imported torch once");
  sub->add_option("command", args->command, "the rank program and its arguments (after --)")
      ->required();
  sub->footer(exitCodesFooter(
      {"every rank exited 0, or with --audit did its work and hung at exit (and, with --audit, no "
       "finding)",
       "a rank failed or timed out (or the audit found a violation)",
       "bad arguments, a world too large for this machine, an unwritable --report/--html/"
       "--trace-dir path or a Python script that does not exist or compile (one line, no rank "
       "started) or an unreadable trace",
       "a report that could not be written at the end (the verdict is printed all the same) or an "
       "internal error",
       "interrupted by signal N (the audit still runs)"}));
  return {sub, [args] { return runLaunch(*args); }};
}

}  // namespace ddph::sim
