// The verdict: PASSED or FAILED, each property checked with ok/FAIL, then every violation with its
// ranks, epoch, step, detail and likely cause, as the text report shows them.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sections.h"

namespace ddph::report::detail {
namespace {

std::string where(const ViolationRow& v) {
  std::string out;
  if (!v.ranks.empty()) {
    std::vector<std::int64_t> ranks = v.ranks;
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    out += fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", rangesText(ranks));
  } else {
    out += "all ranks";
  }
  if (v.epoch >= 0) out += fmt::format(", epoch {}", v.epoch);
  if (v.step >= 0) out += fmt::format(", step {}", v.step);
  return out;
}

// The catalogue's properties, then any property that failed without being listed.
std::vector<PropertyRow> propertiesShown(const Verdict& verdict) {
  std::vector<PropertyRow> properties = verdict.properties;
  for (const auto& v : verdict.violations) {
    if (std::none_of(properties.begin(), properties.end(),
                     [&](const PropertyRow& p) { return p.name == v.property; })) {
      properties.push_back({v.property, ""});
    }
  }
  return properties;
}

// Each property with ok, FAIL (its number of violations) or n/a, and what holds when it holds.
std::string propertyTable(const std::vector<PropertyRow>& properties, const std::map<std::string, int>& failures) {
  std::string body =
      "<table class=\"properties\"><tr><th>property</th><th>result</th><th>what holds when it holds</th></tr>\n";
  for (const auto& p : properties) {
    const auto f = failures.find(p.name);
    const bool failed = f != failures.end();
    body += fmt::format("<tr><td>{}</td><td><span class=\"badge {}\">{}</span></td><td>{}</td></tr>\n",
                        escape(p.name), failed ? "fail" : (p.applies ? "pass" : "na"),
                        failed ? fmt::format("FAIL ({})", f->second)
                               : std::string(p.applies ? "ok" : "n/a"),
                        escape(p.summary));
  }
  body += "</table>\n";
  return body;
}

// A violation's box: what failed where, its detail, likely cause, notes and help.
std::string violationBox(const ViolationRow& v) {
  std::string box = fmt::format("<div class=\"violation\"><b>FAIL {}</b> — {}<div>{}</div>",
                                escape(v.property), escape(where(v)), escape(v.detail));
  if (!v.likelyCause.empty()) {
    box += fmt::format("<div class=\"cause\">likely cause: {}</div>", escape(v.likelyCause));
  }
  for (const auto& note : v.notes) {
    box += fmt::format("<div class=\"finding-note\">note: {}</div>", escape(note));
  }
  if (!v.help.empty()) box += fmt::format("<div class=\"help\">help: {}</div>", escape(v.help));
  box += "</div>\n";
  return box;
}

std::string verdictReading(const Verdict& verdict, std::size_t judged, std::size_t notApplicable) {
  if (verdict.violations.empty()) {
    return verdict.passed ? fmt::format("Every one of the {} properties judged held{}.", judged,
                                        notApplicable == 0 ? "" : fmt::format(" ({} n/a: nothing in the run for them)", notApplicable))
                          : "No property was violated, but the run did not finish (see the notes).";
  }
  const ViolationRow& first = verdict.violations.front();
  // The reading stays one line: the whole detail is in the violation's box below.
  constexpr std::size_t kShown = 240;
  std::string detail = first.detail.substr(0, kShown);
  if (first.detail.size() > kShown) detail += " …";
  return fmt::format("{} broke first ({}): {}", first.property, where(first), detail);
}

}  // namespace

std::string verdictSection(const Verdict& verdict) {
  std::map<std::string, int> failures;
  for (const auto& v : verdict.violations) ++failures[v.property];
  const std::vector<PropertyRow> properties = propertiesShown(verdict);
  // An n/a property held nothing: it counts neither as held nor as judged.
  const auto judged = static_cast<std::size_t>(std::count_if(
      properties.begin(), properties.end(),
      [&](const PropertyRow& p) { return p.applies || failures.count(p.name) > 0; }));
  const std::size_t notApplicable = properties.size() - judged;
  std::string body = fmt::format(
      "<p><span class=\"badge {}\" id=\"verdict-badge\">{}</span>{} of {} properties held{}{}</p>\n",
      verdict.passed ? "pass" : "fail", verdict.passed ? "PASSED" : "FAILED",
      judged - failures.size(), judged,
      notApplicable == 0 ? "" : fmt::format(" ({} n/a)", notApplicable),
      verdict.violations.empty() ? "" : fmt::format("; {} violation{}", verdict.violations.size(),
                                                    verdict.violations.size() == 1 ? "" : "s"));
  body += propertyTable(properties, failures);
  for (const auto& v : verdict.violations) body += violationBox(v);
  for (const auto& note : verdict.notes) {
    body += fmt::format("<p class=\"note\">note: {}</p>\n", escape(note));
  }
  return section("verdict", "Verdict", verdictReading(verdict, judged, notApplicable), body);
}

}  // namespace ddph::report::detail
