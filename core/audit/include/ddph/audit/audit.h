#pragma once
// The verifier of real runs: the project's properties judged on a trace (ddph/trace/trace.h) of
// an unmodified program, Python or C++.
//
// What it checks, each under the catalogue's property names (ddph/sampler/property.h):
//  - the samplers' partitions of every epoch (coverage, disjointness, reshuffle), with the same
//    definitions the property suite uses (ddph/sampler/partition_checks.h);
//  - what the program consumed (coverage of consumed samples: zip truncation, break);
//  - evaluation passes that count padding duplicates (no-duplicates);
//  - collectives across ranks (collective-mismatch: uneven steps, desynchronised calls);
//  - how each rank ended (rank-failure, with where it stood and the collective it was blocked in);
//  - the replicas' parameters (replica-consistency, parameter-updates).
// See docs/audit.md for each finding with real output.

#include <set>
#include <string>
#include <vector>

#include "ddph/audit/planned_run.h"
#include "ddph/audit/trace_records.h"
#include "ddph/sampler/property.h"

namespace ddph::audit {

/// What the audit saw, for the report's overview.
struct AuditSeen {
  std::vector<std::string> samplers;     ///< one line each, rank 0's view
  std::vector<std::string> loaders;      ///< one line each
  std::vector<std::string> ddpModules;   ///< one line each
  std::int64_t collectives = 0;          ///< entered on rank 0 (all groups)
  std::vector<std::pair<std::string, std::int64_t>> collectivesByOp;  ///< rank 0
  /// "node 1 (node1): ranks 2, 3 (local ranks 0, 1)", when the ranks ran on more than one node.
  std::vector<std::string> ranksPerNode;
};

struct AuditReport {
  std::string traceDir;
  std::string program;  ///< rank 0's argv, joined
  int worldSize = 0;
  int ranksTraced = 0;
  bool passed = true;
  std::vector<sampler::Violation> violations;
  std::vector<std::string> notes;
  AuditSeen seen;
  int interruptedBy = 0;  ///< the launcher was interrupted (launch --audit)
  /// One line when the run was emulated (--cpu): what the program asked for, what it ran on.
  std::string emulated;
  int attempt = 0;        ///< which attempt of a torchrun-restarted run (Trace::attempt)
  std::vector<std::string> laterAttempts;  ///< the later attempts' folders
  /// Properties nothing in this run could be judged by (no loader's partition known, no
  /// evaluation pass, no DDP module): shown as "n/a" on the page, never as "ok".
  std::set<std::string> notApplicable;
  /// The run's jobs, when it had more than one (auditRun): "job 1: DIR", each job's folders.
  std::vector<std::string> jobs;
};

/// The one judge of a trace: every check on `trace`, then what the caller's plan knows
/// (planned_run.h; `ddp-sim run` gives its scenario's, a real program's audit none). Never
/// throws for what a trace says (only for internal errors). The root causes come first
/// (collectives, data, replicas), then the ranks that failed.
AuditReport judge(const Trace& trace, const PlannedRun& plan);

/// judge(trace) of a real program: no plan.
AuditReport auditTrace(const Trace& trace);

/// Runs every check on each job of a run (readRun) and judges each job with the one it resumed
/// from: an epoch a job ended inside is judged with the next job's first pass over the loader
/// (NOTE [A run of several jobs]), in place of each job's own view of it. One job: auditTrace.
/// Findings and notes of a run of several jobs name their job ("job 2: …").
AuditReport auditRun(const std::vector<Trace>& jobs);

/// {"trace_dir":…, "program":…, "world_size":…, "passed":…, "violations":[…], "notes":[…],
///  "seen":{…}} — violations as in `ddp-sim run`'s report; "attempt" and "later_attempts" when
///  torchrun restarted the ranks.
std::string auditReportJson(const AuditReport& report);

/// The human summary: verdict, each violation with its likely cause, what was seen.
std::string auditReportText(const AuditReport& report);

}  // namespace ddph::audit
