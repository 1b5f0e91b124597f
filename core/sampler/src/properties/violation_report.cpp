#include "ddph/sampler/violation_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace ddph::sampler {

std::string violationsText(const std::vector<Violation>& violations,
                           const std::vector<std::string>& hints, std::size_t shown) {
  std::string out;
  for (std::size_t i = 0; i < violations.size() && i < shown; ++i) {
    const Violation& v = violations[i];
    out += fmt::format("  FAIL {}\n", formatViolation(v));
    if (i == 0) {
      for (const auto& hint : hints) out += fmt::format("       likely cause: {}\n", hint);
    }
    // A violation's own cause is always shown; the catalogue's once per property.
    const bool repeated = std::any_of(violations.begin(), violations.begin() + static_cast<long>(i),
                                      [&](const Violation& w) { return w.property == v.property; });
    const std::string cause = likelyCauseOf(v);
    if (!cause.empty() && (!v.likelyCause.empty() || !repeated)) {
      const bool usual = !hints.empty() && v.likelyCause.empty();
      out += fmt::format("       {}: {}\n", usual ? "usual cause" : "likely cause", cause);
    }
  }
  if (violations.size() > shown) {
    out += fmt::format("  … {} more violations (see --report)\n", violations.size() - shown);
  }
  return out;
}

}  // namespace ddph::sampler
