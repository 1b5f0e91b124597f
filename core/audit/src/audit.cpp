// auditTrace: every check over one trace, in the order a reader wants the findings (the root
// causes first: collectives, data, replicas; then the ranks that failed), and what was seen.
#include "ddph/audit/audit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "audit_checks.h"
#include "ddph/common/child_process.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

namespace {

std::string orderName(OrderKind k) {
  switch (k) {
    case OrderKind::kTorchDistributed: return "torch-distributed";
    case OrderKind::kSequential: return "sequential";
    case OrderKind::kRecorded: return "recorded";
  }
  return "?";
}

std::vector<std::int64_t> setEpochValues(const SamplerRecord& s) {
  std::vector<std::int64_t> out;
  for (const auto& c : s.setEpochCalls) out.push_back(c.epoch);
  return out;
}

AuditSeen seenOn(const RankTrace& t) {
  AuditSeen seen;
  for (const auto& [id, s] : t.samplers) {
    std::string params;
    if (s.numReplicas) params += fmt::format(", num_replicas {}", *s.numReplicas);
    if (s.seed) params += fmt::format(", seed {}", *s.seed);
    if (s.shuffle) params += fmt::format(", shuffle {}", *s.shuffle);
    if (s.dropLast) params += fmt::format(", drop_last {}", *s.dropLast);
    seen.samplers.push_back(fmt::format(
        "sampler {}: {} over {} samples{} (order {}); set_epoch {}", id, s.className, s.datasetLen,
        params, orderName(s.order),
        s.setEpochCalls.empty() ? std::string("never called")
                                : fmt::format("called {} times ({})", s.setEpochCalls.size(),
                                              fmt::join(setEpochValues(s), ", "))));
  }
  for (const auto& [id, l] : t.loaders) {
    std::int64_t passes = 0, batches = 0;
    for (const auto& p : t.passes) {
      if (p.loader != id) continue;
      ++passes;
      batches += static_cast<std::int64_t>(p.batches.size());
    }
    seen.loaders.push_back(fmt::format(
        "{}: {}, {}; {} epochs, {} batches{}", describeLoader(t, id),
        l.batchSize > 0 ? fmt::format("batch size {}", l.batchSize)
                        : std::string("batches from its batch_sampler"),
        l.sampler >= 0 ? fmt::format("sampler {}", l.sampler) : std::string("no sampler (an iterable dataset)"),
        passes, batches,
        l.peeks == 0 ? std::string()
                     : fmt::format("; {} peek{} (an iterator whose batches fed no training step: "
                                   "not an epoch)",
                                   l.peeks, l.peeks == 1 ? "" : "s")));
  }
  for (const auto& [id, d] : t.ddp) {
    if (d.outsideDdp) {
      seen.ddpModules.push_back(fmt::format("optimizer {}: {} over {} parameters that no DDP "
                                            "module holds",
                                            id, d.module, d.parameters));
      continue;
    }
    if (!d.averagedBy.empty()) {
      seen.ddpModules.push_back(fmt::format("optimizer {}: {} over {} parameters, gradients "
                                            "averaged by the program's own {} (no DDP)",
                                            id, d.module, d.parameters, d.averagedBy));
      continue;
    }
    seen.ddpModules.push_back(fmt::format("DDP module {}: {}, {} parameters, {} forwards, {} "
                                          "backwards",
                                          id, d.module, d.parameters, d.forwards, d.backwards));
  }
  std::map<std::string, std::int64_t> byOp;
  for (const auto& [group, list] : t.collectives) {
    for (const auto& c : list) {
      ++byOp[c.src == "ddp" ? c.op + " (DDP)" : c.op];
      ++seen.collectives;
    }
  }
  seen.collectivesByOp.assign(byOp.begin(), byOp.end());
  return seen;
}

// "the program asked for nccl and 4 CUDA devices per node; it ran on gloo and the CPU (--cpu,
// autocast off: float32)", from the first rank that recorded the emulation.
std::string emulatedLine(const Trace& trace) {
  for (const auto& t : trace.ranks) {
    if (!t || !t->emulation) continue;
    const EmulationRecord& m = *t->emulation;
    const std::string backend = m.askedBackend.empty() ? "no backend of its own" : m.askedBackend;
    return fmt::format("the program asked for {} and {} CUDA device{} per node; it ran on gloo and "
                       "the CPU (--cpu, autocast {})",
                       backend, m.gpus, m.gpus == 1 ? "" : "s",
                       m.autocast == "bf16" ? "on the CPU in bfloat16" : "off: float32");
  }
  return {};
}

// The user's own stop: the ranks the launcher stopped, and how far rank 0 had come.
std::string interruptedNote(const Trace& trace) {
  std::vector<int> stopped;
  for (const auto& r : trace.launch->ranks) {
    if (r.outcome == "stopped") stopped.push_back(r.rank);
  }
  std::int64_t passes = 0, batches = 0;
  if (!trace.ranks.empty() && trace.ranks[0]) {
    passes = static_cast<std::int64_t>(trace.ranks[0]->passes.size());
    for (const auto& p : trace.ranks[0]->passes) batches += static_cast<std::int64_t>(p.batches.size());
  }
  return fmt::format(
      "the run was interrupted by {} (the user's stop, not a failure): the launcher stopped {} of "
      "{} ranks; judged is what ran before (rank 0: {} passes, {} batches), and an interrupted "
      "run is never PASSED",
      common::signalName(trace.launch->interruptedBy), stopped.size(), trace.worldSize, passes,
      batches);
}

}  // namespace

AuditReport judge(const Trace& trace, const PlannedRun& plan) {
  AuditReport report;
  report.traceDir = trace.dir.string();
  report.worldSize = trace.worldSize;
  report.notes = trace.notes;
  for (const auto& t : trace.ranks) {
    if (!t) continue;
    ++report.ranksTraced;
    if (report.program.empty()) report.program = fmt::format("{}", fmt::join(t->argv, " "));
  }
  if (trace.launch) report.interruptedBy = trace.launch->interruptedBy;
  if (report.interruptedBy != 0) report.notes.push_back(interruptedNote(trace));
  report.attempt = trace.attempt;
  report.emulated = emulatedLine(trace);
  for (const auto& folder : trace.laterAttempts) report.laterAttempts.push_back(folder.string());
  checkGroupCalls(trace, report.violations);
  checkCollectives(trace, report.violations);
  std::set<std::string> judged;
  checkData(trace, report.violations, report.notes, judged);
  // What nothing in the run could be judged by: "n/a" on the page, never "ok".
  for (auto p : {property::kValidRange, property::kCoverage, property::kDisjointness,
                 property::kReshuffle, property::kNoDuplicates}) {
    if (!judged.count(std::string(p))) report.notApplicable.insert(std::string(p));
  }
  bool ddp = false;
  for (const auto& t : trace.ranks) ddp = ddp || (t && !t->ddp.empty());
  if (!ddp) {
    report.notApplicable.insert(std::string(property::kReplicaConsistency));
    report.notApplicable.insert(std::string(property::kParameterUpdates));
  }
  checkReplicas(trace, report.violations);
  checkAveragedModels(trace, report.violations);
  checkRanks(trace, report.violations, report.notes);
  for (const auto& t : trace.ranks) {
    if (t) {
      report.seen = seenOn(*t);
      break;
    }
  }
  report.seen.ranksPerNode = ranksPerNode(trace);
  applyPlan(plan, report);
  report.passed = report.violations.empty();
  return report;
}

AuditReport auditTrace(const Trace& trace) { return judge(trace, PlannedRun{}); }

namespace {

// "job 2 (runs/b)": one job's name in a run of several, its folders joined.
std::string jobLabel(int k, const Trace& t) {
  std::vector<std::string> folders;
  for (const auto& f : t.folders) folders.push_back(f.string());
  if (folders.empty()) folders.push_back(t.dir.string());
  return fmt::format("job {} ({})", k, fmt::join(folders, ", "));
}

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// What a judgement across two jobs replaces in each job's own report: in the earlier one, the
// note that the run ended inside the epoch; in the later one, its first pass's coverage finding.
void dropReplaced(const Trace& trace, const std::set<std::int64_t>& loaders, bool later,
                  AuditReport& report) {
  const RankTrace* first = firstTraced(trace);
  if (!first) return;
  for (std::int64_t loader : loaders) {
    const std::string about = describeLoader(*first, loader);
    if (later) {
      auto& vs = report.violations;
      vs.erase(std::remove_if(vs.begin(), vs.end(),
                              [&](const Violation& v) {
                                return v.property == property::kCoverage && v.epoch == 0 &&
                                       (startsWith(v.detail, about + ":") ||
                                        startsWith(v.detail, about + ","));
                              }),
               vs.end());
    }
    // The notes each job's own view left about that epoch (NOTE [A run that ends inside a pass],
    // NOTE [A job that begins at a later epoch]).
    const std::string note = about + (later ? ": the job began at epoch" : ": the run ended inside epoch");
    auto& ns = report.notes;
    ns.erase(std::remove_if(ns.begin(), ns.end(),
                            [&](const std::string& n) { return startsWith(n, note); }),
             ns.end());
  }
}

}  // namespace

AuditReport auditRun(const std::vector<Trace>& jobs) {
  if (jobs.size() == 1) return auditTrace(jobs.front());
  std::vector<AuditReport> reports;
  for (const auto& job : jobs) reports.push_back(auditTrace(job));
  std::vector<ResumedJobJudgement> across;
  for (std::size_t k = 0; k + 1 < jobs.size(); ++k) {
    across.push_back(checkResumedJob(jobs[k], jobs[k + 1], static_cast<int>(k) + 1));
    dropReplaced(jobs[k], across.back().loaders, /*later=*/false, reports[k]);
    dropReplaced(jobs[k + 1], across.back().loaders, /*later=*/true, reports[k + 1]);
  }
  // The run's report: the last job's view (what it saw, its world), every job's findings.
  AuditReport run = reports.back();
  run.violations.clear();
  run.notes.clear();
  std::vector<std::string> dirs;
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const int job = static_cast<int>(k) + 1;
    run.jobs.push_back(jobLabel(job, jobs[k]));
    dirs.push_back(reports[k].traceDir);
    for (auto v : reports[k].violations) {
      v.detail = fmt::format("job {}: {}", job, v.detail);
      run.violations.push_back(std::move(v));
    }
    for (const auto& n : reports[k].notes) run.notes.push_back(fmt::format("job {}: {}", job, n));
    if (k < across.size()) {
      for (const auto& v : across[k].violations) run.violations.push_back(v);
      for (const auto& n : across[k].notes) run.notes.push_back(n);
    }
  }
  // A property judged in any job is judged in the run.
  for (const auto& r : reports) {
    for (auto it = run.notApplicable.begin(); it != run.notApplicable.end();) {
      it = r.notApplicable.count(*it) ? std::next(it) : run.notApplicable.erase(it);
    }
    run.interruptedBy = run.interruptedBy != 0 ? run.interruptedBy : r.interruptedBy;
  }
  run.traceDir = fmt::format("{}", fmt::join(dirs, " "));
  run.passed = run.violations.empty();
  return run;
}

}  // namespace ddph::audit
