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

namespace {

// The sampler's answers that one case's checks use, each asked for once and only when a check
// needs it.
struct Answers {
  Sampler& sampler;
  const SamplerCase& c;
  std::optional<Partition> current, next, again, shifted, whole, sameWorld;
  std::optional<ResumedEpoch> resumed;

  const Partition& get(std::optional<Partition>& slot, std::int64_t epoch, std::int64_t seed) {
    if (!slot) slot = sampler.partition({c.datasetSize, c.numReplicas, epoch, seed});
    return *slot;
  }
};

std::optional<Violation> checkResumeProperty(const std::string& name, Answers& a, const Expectations& e) {
  const SamplerCase& c = a.c;
  if (!a.resumed) a.resumed = askResumedEpoch(a.sampler, c);
  if (name == property::kResumeExactlyOnce) return checkResumeExactlyOnce(*a.resumed, e);
  if (name == property::kResumeBalance) return checkResumeBalance(*a.resumed);
  if (name == property::kResumeOrder && !c.resume.empty()) {
    // The first run's consumed count, resumed on the case's own world size.
    const SamplerCase fresh{c.datasetSize, c.numReplicas, c.epoch, c.seed};
    if (!a.whole) a.whole = a.sampler.partition(fresh);
    const std::int64_t consumed =
        std::min(c.resume.front().consumed,
                 distributedNumSamples(c.datasetSize, c.numReplicas, e.dropLast));
    SamplerCase again = fresh;
    again.resume = {{c.numReplicas, consumed}};
    if (!a.sameWorld) a.sameWorld = a.sampler.partition(again);
    return checkResumeOrder(*a.whole, *a.sameWorld, consumed);
  }
  return std::nullopt;
}

// A property of the epoch from its start.
std::optional<Violation> checkEpochProperty(const std::string& name, Answers& a, const Expectations& e) {
  const SamplerCase& c = a.c;
  const Partition& p = a.get(a.current, c.epoch, c.seed);
  if (name == property::kValidRange) return checkValidRange(p);
  if (name == property::kEqualLength) return checkEqualLength(p, e);
  if (name == property::kCoverage) return checkCoverage(p, e);
  if (name == property::kDisjointness) return checkDisjointness(p, e);
  if (name == property::kPadding) return checkPadding(p, e);
  if (name == property::kReshuffle) {
    // A sampler asked for epoch E (the protocol's "epoch", Sampler::partition) was given it:
    // the cause is the sampler's, not a missing set_epoch of a program.
    auto v = checkReshuffle(p, a.get(a.next, c.epoch + 1, c.seed), e);
    if (v) {
      v->likelyCause =
          "the sampler's order does not follow the epoch it is asked for: it ignores the "
          "epoch (seed its generator with seed + epoch; an adapter around torch's "
          "DistributedSampler must call set_epoch(epoch) on it before iterating)";
    }
    return v;
  }
  if (name == property::kDeterminism) return checkDeterminism(p, a.get(a.again, c.epoch, c.seed));
  if (name == property::kSeedPlusEpoch) {
    if (c.epoch >= 1) return checkSeedPlusEpoch(p, a.get(a.shifted, c.epoch - 1, c.seed + 1));
    return std::nullopt;
  }
  if (name == property::kNoDuplicates) return checkNoDuplicates(p);
  if (name == property::kBalancedLength) return checkBalancedLength(p);
  if (name == property::kRanksAgree) return checkRanksAgree(p);
  return std::nullopt;
}

}  // namespace

std::vector<Violation> checkSampler(Sampler& sampler, const SamplerCase& c, const Expectations& e,
                                    const std::vector<std::string>& properties) {
  validatePropertyNames(properties);
  Answers answers{sampler, c, {}, {}, {}, {}, {}, {}, {}};
  std::vector<Violation> found;
  for (const auto& name : properties) {
    std::optional<Violation> v = isResumeProperty(name) ? checkResumeProperty(name, answers, e)
                                                        : checkEpochProperty(name, answers, e);
    if (v) found.push_back(std::move(*v));
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
