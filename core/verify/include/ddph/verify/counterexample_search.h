#pragma once
// Searches for a minimal counterexample to one property of a sampler: RapidCheck generates cases
// (genSamplerCase), checks the property with checkSampler, and on failure shrinks to the smallest
// failing case. Used by the property suite's negative controls and by `ddp-sim check-sampler`.

#include <cstdint>
#include <optional>
#include <string>

#include "ddph/sampler/sampler_checks.h"

namespace ddph::verify {

struct SearchOptions {
  int cases = 100;             ///< cases to try before the property is taken to hold
  std::uint64_t seed = 0;      ///< RapidCheck seed: the same seed explores the same cases
  std::int64_t maxDatasetSize = 2000;
  std::int64_t maxReplicas = 64;
  std::int64_t maxEpoch = 50;
};

struct SearchResult {
  std::string property;
  bool passed = true;
  int casesPassed = 0;                       ///< cases that held before the first failure
  std::optional<sampler::SamplerCase> counterexample;  ///< the minimal failing case
  std::optional<sampler::Violation> violation;         ///< what the minimal case violates
};

/// Throws ProtocolError when the sampler itself fails (an external process crashed, …): that is
/// no counterexample, and searching further would only repeat it.
SearchResult searchCounterexample(sampler::Sampler& sampler, const std::string& property,
                                  const sampler::Expectations& expectations,
                                  const SearchOptions& options);

}  // namespace ddph::verify
