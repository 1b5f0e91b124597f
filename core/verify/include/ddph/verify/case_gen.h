#pragma once
// RapidCheck generators for the configuration space of distributed samplers. Included by the
// property suite and by the counterexample search; keeps RapidCheck out of the other headers.
// ddph::verify links RapidCheck privately: a target that includes this header links rapidcheck
// itself (the property suite does).

#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "ddph/sampler/sampler_checks.h"

namespace ddph::verify {

/// Bounds of the generated cases. Small values are favoured (and everything shrinks towards
/// N = 0, W = 1, epoch = 0, seed = 0), large ones are still reached.
struct CaseBounds {
  std::int64_t maxDatasetSize = 2000;
  std::int64_t maxReplicas = 64;
  std::int64_t maxEpoch = 50;
};

rc::Gen<sampler::SamplerCase> genSamplerCase(const CaseBounds& bounds = {});

/// The earlier runs of an epoch of `datasetSize` samples (one or two), for the resume properties:
/// world sizes within the bounds, consumed counts every run can yield. Shrinks towards one run on
/// one rank that consumed nothing.
rc::Gen<std::vector<sampler::ResumePoint>> genResume(std::int64_t datasetSize,
                                                     const CaseBounds& bounds = {});

}  // namespace ddph::verify

namespace rc {
template <>
struct Arbitrary<ddph::sampler::SamplerCase> {
  static Gen<ddph::sampler::SamplerCase> arbitrary() { return ddph::verify::genSamplerCase(); }
};
}  // namespace rc

// RapidCheck prints a value through showValue found by argument-dependent lookup, so it is
// declared in SamplerCase's own namespace.
namespace ddph::sampler {
inline void showValue(const SamplerCase& c, std::ostream& os) { os << formatCase(c); }
}  // namespace ddph::sampler
