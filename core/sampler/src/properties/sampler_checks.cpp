#include "ddph/sampler/sampler_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "ddph/common/error.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/elastic_sampler.h"
#include "ddph/sampler/resume_checks.h"

namespace ddph::sampler {

using common::Error;
using common::ProtocolError;

std::string formatCase(const SamplerCase& c) {
  // " resume=4:3,2:1": the earlier runs as W:consumed, oldest first.
  const std::string resume = c.resume.empty() ? "" : " resume=" + formatResumePoints(c.resume);
  return fmt::format("N={} W={} epoch={} seed={}{}", c.datasetSize, c.numReplicas, c.epoch, c.seed,
                     resume);
}

std::vector<std::string> allSamplerPropertyNames() {
  std::vector<std::string> names;
  for (const auto& p : samplerProperties()) names.emplace_back(p.name);
  return names;
}

std::vector<std::string> distributedSamplerPropertyNames() {
  std::vector<std::string> names;
  for (auto name : {property::kValidRange, property::kEqualLength, property::kCoverage,
                    property::kDisjointness, property::kPadding, property::kReshuffle,
                    property::kDeterminism, property::kSeedPlusEpoch}) {
    names.emplace_back(name);
  }
  return names;
}

void validatePropertyNames(const std::vector<std::string>& properties) {
  const auto all = allSamplerPropertyNames();
  for (const auto& name : properties) {
    DDPH_CHECK(std::find(all.begin(), all.end(), name) != all.end(), "unknown property '{}'", name);
  }
}

std::vector<Violation> checkSampler(Sampler& sampler, const SamplerCase& c, const Expectations& e,
                                    const std::vector<std::string>& properties) {
  validatePropertyNames(properties);
  std::optional<Partition> current, next, again, shifted, whole, sameWorld;
  std::optional<ResumedEpoch> resumed;
  auto get = [&](std::optional<Partition>& slot, std::int64_t epoch, std::int64_t seed) -> const Partition& {
    if (!slot) slot = sampler.partition({c.datasetSize, c.numReplicas, epoch, seed});
    return *slot;
  };
  std::vector<Violation> found;
  auto add = [&](std::optional<Violation> v) {
    if (v) found.push_back(std::move(*v));
  };
  for (const auto& name : properties) {
    if (isResumeProperty(name)) {
      if (!resumed) resumed = askResumedEpoch(sampler, c);
      if (name == property::kResumeExactlyOnce) add(checkResumeExactlyOnce(*resumed, e));
      if (name == property::kResumeBalance) add(checkResumeBalance(*resumed));
      if (name == property::kResumeOrder && !c.resume.empty()) {
        // The first run's consumed count, resumed on the case's own world size.
        const SamplerCase fresh{c.datasetSize, c.numReplicas, c.epoch, c.seed};
        if (!whole) whole = sampler.partition(fresh);
        const std::int64_t consumed =
            std::min(c.resume.front().consumed,
                     distributedNumSamples(c.datasetSize, c.numReplicas, e.dropLast));
        SamplerCase again = fresh;
        again.resume = {{c.numReplicas, consumed}};
        if (!sameWorld) sameWorld = sampler.partition(again);
        add(checkResumeOrder(*whole, *sameWorld, consumed));
      }
      continue;
    }
    // The other properties are about the epoch from its start.
    const Partition& p = get(current, c.epoch, c.seed);
    if (name == property::kValidRange) {
      add(checkValidRange(p));
    } else if (name == property::kEqualLength) {
      add(checkEqualLength(p, e));
    } else if (name == property::kCoverage) {
      add(checkCoverage(p, e));
    } else if (name == property::kDisjointness) {
      add(checkDisjointness(p, e));
    } else if (name == property::kPadding) {
      add(checkPadding(p, e));
    } else if (name == property::kReshuffle) {
      // A sampler asked for epoch E (the protocol's "epoch", Sampler::partition) was given it:
      // the cause is the sampler's, not a missing set_epoch of a program.
      auto v = checkReshuffle(p, get(next, c.epoch + 1, c.seed), e);
      if (v) {
        v->likelyCause =
            "the sampler's order does not follow the epoch it is asked for: it ignores the "
            "epoch (seed its generator with seed + epoch; an adapter around torch's "
            "DistributedSampler must call set_epoch(epoch) on it before iterating)";
      }
      add(std::move(v));
    } else if (name == property::kDeterminism) {
      add(checkDeterminism(p, get(again, c.epoch, c.seed)));
    } else if (name == property::kSeedPlusEpoch) {
      if (c.epoch >= 1) add(checkSeedPlusEpoch(p, get(shifted, c.epoch - 1, c.seed + 1)));
    } else if (name == property::kNoDuplicates) {
      add(checkNoDuplicates(p));
    } else if (name == property::kBalancedLength) {
      add(checkBalancedLength(p));
    } else if (name == property::kRanksAgree) {
      add(checkRanksAgree(p));
    }
  }
  return found;
}

std::vector<Violation> checkSamplerOrRejection(Sampler& sampler, const SamplerCase& c,
                                               const Expectations& e,
                                               const std::vector<std::string>& properties) {
  validatePropertyNames(properties);  // an unknown name is the caller's mistake, not the sampler's
  try {
    return checkSampler(sampler, c, e, properties);
  } catch (const ProtocolError&) {
    throw;
  } catch (const Error& error) {
    Violation v;
    v.property = properties.empty() ? std::string() : properties.front();
    v.epoch = c.epoch;
    v.detail = fmt::format("the sampler rejected a valid request: {}", error.what());
    return {std::move(v)};
  }
}

}  // namespace ddph::sampler
