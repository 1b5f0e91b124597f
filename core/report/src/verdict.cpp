#include "ddph/report/verdict.h"

namespace ddph::report {

using sampler::findProperty;
using sampler::likelyCauseOf;
using sampler::PropertyInfo;
using sampler::Violation;

ViolationRow violationRow(const Violation& violation) {
  return {violation.property, violation.ranks,           violation.epoch,
          violation.step,     violation.detail,          likelyCauseOf(violation),
          violation.notes,    sampler::helpOf(violation)};
}

Verdict verdictOf(bool passed, const std::vector<Violation>& violations,
                 const std::vector<std::string>& notes,
                 const std::vector<std::string_view>& checked,
                 const std::set<std::string>& notApplicable) {
  Verdict v;
  v.passed = passed;
  for (const auto name : checked) {
    const PropertyInfo* info = findProperty(name);
    v.properties.push_back({std::string(name), info ? std::string(info->summary) : std::string(),
                            notApplicable.count(std::string(name)) == 0});
  }
  for (const auto& violation : violations) v.violations.push_back(violationRow(violation));
  v.notes = notes;
  return v;
}

}  // namespace ddph::report
