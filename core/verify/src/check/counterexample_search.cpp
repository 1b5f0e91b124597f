#include "ddph/verify/counterexample_search.h"

#include <rapidcheck.h>
#include <rapidcheck/detail/TestListener.h>

#include "ddph/common/error.h"
#include "ddph/sampler/resume_checks.h"
#include "ddph/verify/case_gen.h"

namespace ddph::verify {

using common::Error;
using common::ProtocolError;
using sampler::checkSamplerOrRejection;
using sampler::Expectations;
using sampler::findProperty;
using sampler::formatViolation;
using sampler::isResumeProperty;
using sampler::Sampler;
using sampler::SamplerCase;
using sampler::Violation;

namespace {

// Keeps RapidCheck quiet: the caller reports the result itself, and a failure found here must not
// end up in RapidCheck's global "to reproduce these, run with RC_PARAMS=…" message at exit.
class SilentListener final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

}  // namespace

SearchResult searchCounterexample(Sampler& sampler, const std::string& property,
                                  const Expectations& expectations, const SearchOptions& options) {
  DDPH_CHECK(findProperty(property) != nullptr, "unknown property '{}'", property);
  const CaseBounds bounds{options.maxDatasetSize, options.maxReplicas, options.maxEpoch};
  SearchResult result;
  result.property = property;
  // RapidCheck re-runs the property while it shrinks; the last failing run is the minimal case.
  std::optional<std::string> samplerFailure;
  auto testable = [&] {
    SamplerCase c = *genSamplerCase(bounds);
    if (isResumeProperty(property)) c.resume = *genResume(c.datasetSize, bounds);
    if (samplerFailure) return;  // a broken sampler: stop asking it anything
    std::vector<Violation> found;
    try {
      found = checkSamplerOrRejection(sampler, c, expectations, {property});
    } catch (const ProtocolError& e) {
      samplerFailure = e.what();
      return;
    }
    if (!found.empty()) {
      result.counterexample = c;
      result.violation = found.front();
      RC_FAIL(formatViolation(found.front()));
    }
  };
  rc::detail::TestMetadata metadata;
  metadata.id = property;
  metadata.description = property;
  rc::detail::TestParams params;
  params.seed = options.seed;
  params.maxSuccess = options.cases;
  SilentListener listener;
  const auto outcome = rc::detail::checkTestable(testable, metadata, params, listener);
  if (samplerFailure) throw ProtocolError(*samplerFailure);
  if (outcome.is<rc::detail::FailureResult>()) {
    const auto& failure = outcome.get<rc::detail::FailureResult>();
    result.passed = false;
    result.casesPassed = failure.numSuccess;
    DDPH_ASSERT(result.violation.has_value());
  } else if (outcome.is<rc::detail::SuccessResult>()) {
    result.casesPassed = outcome.get<rc::detail::SuccessResult>().numSuccess;
    result.counterexample.reset();
    result.violation.reset();
  } else {
    throw Error(fmt::format("property {}: RapidCheck gave up or failed", property));
  }
  return result;
}

}  // namespace ddph::verify
