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
    const bool ownOrFirst = !v.likelyCause.empty() || !repeated;
    if (!cause.empty() && ownOrFirst) {
      const bool usual = !hints.empty() && v.likelyCause.empty();
      out += fmt::format("       {}: {}\n", usual ? "usual cause" : "likely cause", cause);
    }
    for (const auto& note : v.notes) out += fmt::format("       note: {}\n", note);
    const std::string help = helpOf(v);
    if (!help.empty() && (!v.help.empty() || ownOrFirst)) {
      out += fmt::format("       help: {}\n", help);
    }
  }
  if (violations.size() > shown) {
    out += fmt::format("  … {} more violations (see --report)\n", violations.size() - shown);
  }
  return out;
}

}  // namespace ddph::sampler
