#include "ddph/verify/contract.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddph/common/error.h"
#include "ddph/sampler/property.h"

namespace ddph::verify {

using common::ConfigError;
using sampler::allSamplerPropertyNames;
using sampler::checkSamplerOrRejection;
using sampler::Expectations;
using sampler::findProperty;
using sampler::formatCase;
using sampler::formatViolation;
using sampler::Index;
using sampler::likelyCauseOf;
using sampler::Partition;
using sampler::Sampler;
using sampler::SamplerCase;
using sampler::ShardRequest;
using sampler::Violation;
namespace property = sampler::property;

namespace {

std::vector<Contract> makeBuiltinContracts() {
  std::vector<Contract> contracts;
  const std::vector<std::string> pytorchProperties = {
      std::string(property::kValidRange),   std::string(property::kEqualLength),
      std::string(property::kCoverage),     std::string(property::kDisjointness),
      std::string(property::kReshuffle),    std::string(property::kDeterminism),
      std::string(property::kSeedPlusEpoch)};

  Expectations pytorch;  // DistributedSampler's defaults: shuffle, no drop_last
  contracts.push_back({"pytorch",
                       "torch.utils.data.DistributedSampler (shuffle=True, drop_last=False)",
                       pytorchProperties, pytorch});

  // Elastic resume: DistributedSampler's promises, and the epoch survives a stop on W ranks and a
  // resume on W' (NOTE [Elastic resume]).
  std::vector<std::string> elasticProperties = pytorchProperties;
  for (auto name : {property::kResumeExactlyOnce, property::kResumeOrder, property::kResumeBalance}) {
    elasticProperties.emplace_back(name);
  }
  contracts.push_back({"elastic",
                       "DistributedSampler's order that resumes mid-epoch on another world size, "
                       "every sample exactly once",
                       elasticProperties, pytorch});

  Expectations dropLast;
  dropLast.dropLast = true;
  contracts.push_back({"drop-last", "DistributedSampler with drop_last=True", pytorchProperties,
                       dropLast});

  // Evaluation sharding: every sample scored exactly once, so no padding; lengths may differ by
  // one (the ranks' metrics are all-reduced as sums, not per step).
  Expectations exactlyOnce;
  exactlyOnce.pytorchLengths = false;
  contracts.push_back({"exactly-once",
                       "evaluation sharding: every index on exactly one rank, lengths within one",
                       {std::string(property::kValidRange), std::string(property::kCoverage),
                        std::string(property::kNoDuplicates),
                        std::string(property::kBalancedLength)},
                       exactlyOnce});

  // Weighted or balanced samplers draw with replacement: no coverage or disjointness, and the
  // shard length is the sampler's choice (num_samples), but every rank runs the same number of
  // steps, the same request gives the same answer, and the ranks split one draw.
  Expectations withReplacement;
  withReplacement.pytorchLengths = false;
  contracts.push_back({"with-replacement",
                       "weighted or balanced sampling with replacement, split across ranks",
                       {std::string(property::kValidRange), std::string(property::kEqualLength),
                        std::string(property::kDeterminism), std::string(property::kRanksAgree)},
                       withReplacement});
  return contracts;
}

}  // namespace

std::vector<std::string> contractNames() {
  std::vector<std::string> names;
  for (const auto& c : builtinContracts()) names.push_back(c.name);
  return names;
}

const std::vector<Contract>& builtinContracts() {
  static const std::vector<Contract> kContracts = makeBuiltinContracts();
  return kContracts;
}

const Contract& findContract(std::string_view name) {
  for (const auto& c : builtinContracts()) {
    if (c.name == name) return c;
  }
  throw ConfigError(fmt::format("unknown contract '{}' (expected one of: {})", name,
                                fmt::join(contractNames(), ", ")));
}

void validateContract(const Contract& contract) {
  DDPH_CHECK(!contract.properties.empty(), "contract '{}' names no property", contract.name);
  for (const auto& name : contract.properties) {
    DDPH_CHECK(findProperty(name) != nullptr, "contract '{}': unknown property '{}' (expected "
               "one of: {})", contract.name, name, fmt::join(allSamplerPropertyNames(), ", "));
  }
}

bool ContractResult::passed() const {
  for (const auto& r : results) {
    if (!r.passed) return false;
  }
  return true;
}

std::vector<const SearchResult*> ContractResult::failures() const {
  std::vector<const SearchResult*> failed;
  for (const auto& r : results) {
    if (!r.passed) failed.push_back(&r);
  }
  return failed;
}

ContractResult checkContract(Sampler& sampler, const Contract& contract,
                             const SearchOptions& options) {
  validateContract(contract);
  ContractResult result;
  result.contract = contract.name;
  result.sampler = sampler.name();
  result.options = options;
  for (const auto& property : contract.properties) {
    result.results.push_back(
        searchCounterexample(sampler, property, contract.expectations, options));
  }
  return result;
}

ContractResult checkContract(Sampler& sampler, std::string_view contractName,
                             const SearchOptions& options) {
  return checkContract(sampler, findContract(contractName), options);
}

std::string formatContractResult(const ContractResult& result) {
  std::string out = fmt::format("sampler '{}' against contract '{}' ({} cases a property, seed {}):\n",
                                result.sampler, result.contract, result.options.cases,
                                result.options.seed);
  for (const auto& r : result.results) {
    if (r.passed) {
      out += fmt::format("  ok   {:<15} {} cases\n", r.property, r.casesPassed);
      continue;
    }
    out += fmt::format("  FAIL {:<15} minimal case {} (after {} passing cases)\n", r.property,
                       r.counterexample ? formatCase(*r.counterexample) : "?", r.casesPassed);
    if (r.violation) {
      out += fmt::format("       {}\n", formatViolation(*r.violation));
      out += fmt::format("       likely cause: {}\n", likelyCauseOf(*r.violation));
    }
  }
  const auto failed = result.failures();
  if (failed.empty()) {
    out += fmt::format("contract '{}' holds ({} properties)\n", result.contract,
                       result.results.size());
  } else {
    std::vector<std::string> names;
    for (const auto* f : failed) names.push_back(f->property);
    out += fmt::format("contract '{}' violated: {} of {} properties ({})\n", result.contract,
                       failed.size(), result.results.size(), fmt::join(names, ", "));
  }
  return out;
}

std::vector<Index> RecordingSampler::indices(const ShardRequest& request) {
  auto answer = inner_.indices(request);
  exchanges_.push_back({request, answer, inner_.declaredLength(request)});
  return answer;
}

std::optional<std::int64_t> RecordingSampler::declaredLength(const ShardRequest& request) {
  return inner_.declaredLength(request);
}

Partition RecordingSampler::partition(const SamplerCase& c) {
  Partition p = inner_.partition(c);
  for (std::int64_t r = 0; r < p.numReplicas(); ++r) {
    std::optional<std::int64_t> length;
    if (r < static_cast<std::int64_t>(p.declaredLengths.size())) length = p.declaredLengths[r];
    exchanges_.push_back({c.forRank(r), p.ranks[r], length});
  }
  return p;
}

std::vector<Exchange> recordCase(Sampler& sampler, const SamplerCase& c,
                                 const Expectations& expectations, const std::string& property,
                                 std::optional<Violation>* violation) {
  RecordingSampler recorder(sampler);
  // A rejected request is a violation: the exchanges up to the rejection are still the replay.
  const std::vector<Violation> found = checkSamplerOrRejection(recorder, c, expectations, {property});
  if (violation != nullptr) {
    violation->reset();
    if (!found.empty()) *violation = found.front();
  }
  return recorder.exchanges();
}

}  // namespace ddph::verify
