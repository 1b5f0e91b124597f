// applyPlan: the one judge's second half (NOTE [One judge]), what a planned run's caller
// knows laid over the audit's own findings.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "audit_checks.h"

namespace ddph::audit {

using sampler::Violation;
namespace property = sampler::property;

// NOTE [One judge]: `ddp-sim run` and `ddp-sim audit` reach their findings through judge(): the
// audit's checks judge the trace by the effect in the run, and a caller that planned the run
// adds what only its plan knows (docs/audit.md "One judge"). A harm is judged once: a planned
// finding of a property the audit found on the same dataset is the audit's finding, which keeps
// its evidence and takes the plan's cause when the configuration gives it; a planned departure
// is not a mismatch; an epoch the plan judges by its own properties (a resumed epoch) is not
// judged twice.

namespace {

bool isDataProperty(const std::string& p) {
  for (auto d : {property::kValidRange, property::kCoverage, property::kDisjointness,
                 property::kReshuffle, property::kNoDuplicates, property::kEqualLength,
                 property::kPadding}) {
    if (p == d) return true;
  }
  return false;
}

// The departure's own collectives ending: a mismatch on the departing ranks alone, in its epoch.
bool planned(const PlannedDeparture& d, const Violation& v) {
  if (v.property != property::kCollectiveMismatch || v.epoch != d.epoch) return false;
  return !v.ranks.empty() && std::all_of(v.ranks.begin(), v.ranks.end(), [&](std::int64_t r) {
    return std::find(d.ranks.begin(), d.ranks.end(), r) != d.ranks.end();
  });
}

// The audit's finding of the same harm as `f`: its property, naming its dataset ("loader 0
// (mnist, 60000 samples)") when the plan names one, else the first of its property.
Violation* sameHarm(const PlannedFinding& f, std::vector<Violation>& found) {
  Violation* first = nullptr;
  for (auto& v : found) {
    if (v.property != f.violation.property) continue;
    if (!f.dataset.empty() && v.detail.find("(" + f.dataset + ",") != std::string::npos) return &v;
    if (!first) first = &v;
  }
  return first;
}

}  // namespace

void applyPlan(const PlannedRun& plan, AuditReport& report) {
  auto& found = report.violations;
  if (plan.departure) {
    const PlannedDeparture& d = *plan.departure;
    const auto before = found.size();
    found.erase(std::remove_if(found.begin(), found.end(),
                               [&](const Violation& v) { return planned(d, v); }),
                found.end());
    if (found.size() != before) {
      report.notes.push_back(fmt::format(
          "rank{} {} left after step {} of epoch {}, as planned (the job's stop before its resume)",
          d.ranks.size() == 1 ? "" : "s", fmt::join(d.ranks, ", "), d.step, d.epoch));
    }
  }
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](const Violation& v) {
                               return isDataProperty(v.property) &&
                                      plan.epochsJudgedByPlan.count(v.epoch);
                             }),
              found.end());
  std::vector<Violation> added;
  for (const auto& f : plan.findings) {
    if (Violation* same = sameHarm(f, found)) {
      if (f.causeFromConfiguration) {
        same->likelyCause = f.violation.likelyCause;
        same->help = f.violation.help;
      }
      same->notes.insert(same->notes.end(), f.violation.notes.begin(), f.violation.notes.end());
      continue;
    }
    added.push_back(f.violation);
  }
  found.insert(found.end(), added.begin(), added.end());
  report.notes.insert(report.notes.end(), plan.notes.begin(), plan.notes.end());
  for (const auto& v : found) report.notApplicable.erase(v.property);
}

}  // namespace ddph::audit
