#pragma once
// The page's verdict (html_report.h's Verdict) from the property catalogue's violations
// (ddph/sampler/property.h): what every command with --html shows above its sections.

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/report/html_report.h"
#include "ddph/sampler/property.h"

namespace ddph::report {

/// One violation as the page shows it: its evidence, likely cause, notes and help.
ViolationRow violationRow(const sampler::Violation& violation);

/// The verdict: `checked` with their catalogue summaries (those in `notApplicable` as "n/a"),
/// each violation with its likely cause.
Verdict verdictOf(bool passed, const std::vector<sampler::Violation>& violations,
                 const std::vector<std::string>& notes,
                 const std::vector<std::string_view>& checked,
                 const std::set<std::string>& notApplicable = {});

}  // namespace ddph::report
