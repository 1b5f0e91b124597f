#pragma once
// Runs named properties against a Sampler for one case: asks the sampler for the partitions each
// property needs (the epoch, the next epoch, the same request again, seed + 1 / epoch - 1) once,
// and hands them to the checks of partition_checks.h.

#include <cstdint>
#include <string>
#include <vector>

#include "ddph/sampler/partition_checks.h"
#include "ddph/sampler/sampler.h"

namespace ddph::sampler {

/// "N=13 W=4 epoch=0 seed=0".
std::string formatCase(const SamplerCase& c);

/// Every sampler property name, in catalogue order.
std::vector<std::string> allSamplerPropertyNames();

/// The seven properties PyTorch's DistributedSampler has (valid-range, equal-length, coverage,
/// disjointness, padding, reshuffle, determinism): what the property suite and
/// `ddp-sim sampler --check` assert. The `pytorch` contract is these without `padding`.
std::vector<std::string> distributedSamplerPropertyNames();

/// Throws ConfigError naming the first name that is not a sampler property.
void validatePropertyNames(const std::vector<std::string>& properties);

/// Checks `properties` (names from the catalogue) and returns every violation found, at most one a
/// property. Throws ConfigError for an unknown property name; lets the sampler's own errors through.
std::vector<Violation> checkSampler(Sampler& sampler, const SamplerCase& c, const Expectations& e,
                                    const std::vector<std::string>& properties);

/// Like checkSampler, but a sampler that rejects a valid request (throws a ddph::common::Error
/// other than ProtocolError) yields a violation of the first property checked instead of an
/// exception: a sampler must answer every valid request. ProtocolError (a broken external sampler:
/// crashed, hung, garbage) still propagates, since it is no counterexample.
std::vector<Violation> checkSamplerOrRejection(Sampler& sampler, const SamplerCase& c,
                                               const Expectations& e,
                                               const std::vector<std::string>& properties);

}  // namespace ddph::sampler
