// The audit's report: JSON for machines (violations as in `ddp-sim run`), a summary for people.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "ddph/sampler/violation_report.h"
#include "ddph/audit/audit.h"

namespace ddph::audit {

using sampler::violationJson;
using sampler::violationsText;

std::string auditReportJson(const AuditReport& r) {
  nlohmann::ordered_json j;
  j["trace_dir"] = r.traceDir;
  j["program"] = r.program;
  j["world_size"] = r.worldSize;
  j["ranks_traced"] = r.ranksTraced;
  j["passed"] = r.passed;
  if (!r.emulated.empty()) j["emulated"] = r.emulated;
  auto& violations = j["violations"] = nlohmann::ordered_json::array();
  for (const auto& v : r.violations) violations.push_back(violationJson(v));
  j["notes"] = r.notes;
  j["not_applicable"] = r.notApplicable;  // properties nothing in the run was judged by
  nlohmann::ordered_json byOp = nlohmann::ordered_json::object();
  for (const auto& [op, n] : r.seen.collectivesByOp) byOp[op] = n;
  j["seen"] = {{"samplers", r.seen.samplers},
               {"loaders", r.seen.loaders},
               {"ddp_modules", r.seen.ddpModules},
               {"collectives", r.seen.collectives},
               {"collectives_by_op", byOp}};
  if (!r.seen.ranksPerNode.empty()) j["seen"]["ranks_per_node"] = r.seen.ranksPerNode;
  if (r.interruptedBy != 0) j["interrupted_by_signal"] = r.interruptedBy;
  if (!r.jobs.empty()) j["jobs"] = r.jobs;
  if (r.attempt != 0 || !r.laterAttempts.empty()) {
    j["attempt"] = r.attempt;
    j["later_attempts"] = r.laterAttempts;
  }
  return j.dump(2) + "\n";
}

std::string auditReportText(const AuditReport& r) {
  std::string out = fmt::format("audit of {} ({} of {} ranks traced): {}\n",
                                r.program.empty() ? r.traceDir : r.program, r.ranksTraced,
                                r.worldSize, !r.passed                ? "FAILED"
                                             : r.interruptedBy != 0 ? "INTERRUPTED"
                                                                    : "PASSED");
  if (!r.jobs.empty()) {
    out += fmt::format("  a run of {} jobs, each resumed from the one before: {}\n", r.jobs.size(),
                       fmt::join(r.jobs, "; "));
  }
  if (!r.emulated.empty()) out += fmt::format("  emulated: {}\n", r.emulated);
  constexpr std::size_t kShown = 12;
  out += violationsText(r.violations, {}, kShown);
  for (const auto& note : r.notes) out += fmt::format("  note: {}\n", note);
  if (!r.seen.ranksPerNode.empty()) {
    out += "  ranks per node:\n";
    for (const auto& n : r.seen.ranksPerNode) out += fmt::format("    {}\n", n);
  }
  out += "  seen on rank 0:\n";
  for (const auto& s : r.seen.samplers) out += fmt::format("    {}\n", s);
  for (const auto& l : r.seen.loaders) out += fmt::format("    {}\n", l);
  for (const auto& d : r.seen.ddpModules) out += fmt::format("    {}\n", d);
  std::string ops;
  for (const auto& [op, n] : r.seen.collectivesByOp) {
    ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", n, op);
  }
  out += fmt::format("    {} collectives{}\n", r.seen.collectives, ops.empty() ? "" : ": " + ops);
  return out;
}

}  // namespace ddph::audit
