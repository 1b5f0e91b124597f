#pragma once
// Contracts: named sets of properties a sampler promises, checked in one call.
//
// A contract is only a list of property names from the catalogue (ddph/sampler/property.h)
// plus the Expectations those properties are judged with; the properties themselves live in
// partition_checks.h and are driven by searchCounterexample (RapidCheck generation + shrinking).
// Users compose their own contracts from the same names:
//
//   ddph::verify::Contract mine{"my-eval", "evaluation sharding, any order",
//                               {"valid-range", "coverage", "no-duplicates"},
//                               ddph::verify::Expectations{}};
//   ddph::verify::ContractResult r = ddph::verify::checkContract(mySampler, mine);
//   if (!r.passed()) std::cerr << ddph::verify::formatContractResult(r);

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddph/sampler/partition_checks.h"
#include "ddph/sampler/sampler.h"
#include "ddph/verify/counterexample_search.h"

namespace ddph::verify {

/// What a sampler promises: property names and the expectations they are checked under.
struct Contract {
  std::string name;
  std::string summary;
  std::vector<std::string> properties;  ///< catalogue names, checked in this order
  sampler::Expectations expectations;
};

/// The contracts ddp-harness defines:
///  - `pytorch`: DistributedSampler's (valid-range, equal-length, coverage, disjointness up to
///    padding, reshuffle, determinism including "order depends only on seed + epoch");
///  - `elastic`: `pytorch`'s, and the epoch resumes mid-way on another world size with every
///    sample exactly once (resume-exactly-once, resume-order, resume-balance);
///  - `drop-last`: `pytorch`'s with drop_last=True;
///  - `exactly-once`: evaluation sharding (valid-range, coverage, no-duplicates, balanced-length);
///  - `with-replacement`: weighted or balanced samplers (valid-range, equal-length, determinism
///    of repeated requests, ranks-agree).
const std::vector<Contract>& builtinContracts();

/// The names of builtinContracts(), in order: what --contract accepts and its help lists.
std::vector<std::string> contractNames();

/// The built-in contract `name`; throws ConfigError naming the known ones.
const Contract& findContract(std::string_view name);

/// Throws ConfigError when the contract names an unknown property or none at all.
void validateContract(const Contract& contract);

/// One sampler judged against one contract: a SearchResult per property, in contract order.
struct ContractResult {
  std::string contract;
  std::string sampler;
  SearchOptions options;
  std::vector<SearchResult> results;

  bool passed() const;
  /// The results whose property was violated.
  std::vector<const SearchResult*> failures() const;
  explicit operator bool() const { return passed(); }
};

/// Searches every property of `contract` for a minimal counterexample (options.cases cases each).
/// Throws ProtocolError when the sampler itself fails (an external process crashed, hung or
/// answered garbage) and ConfigError for an invalid contract.
ContractResult checkContract(sampler::Sampler& sampler, const Contract& contract,
                             const SearchOptions& options = {});
/// The built-in contract `name`.
ContractResult checkContract(sampler::Sampler& sampler, std::string_view contractName,
                             const SearchOptions& options = {});

/// A readable multi-line report: one line a property, and for each violated one the minimal case,
/// what it violates and the property's likely cause.
std::string formatContractResult(const ContractResult& result);

/// One question put to a sampler and its answer, as recorded by RecordingSampler.
struct Exchange {
  sampler::ShardRequest request;
  std::vector<sampler::Index> indices;
  std::optional<std::int64_t> declaredLength;
};

/// Wraps a sampler and records every request and answer, so a report can show what a minimal
/// counterexample asked and got. Not thread-safe (like Sampler).
class RecordingSampler final : public sampler::Sampler {
 public:
  explicit RecordingSampler(sampler::Sampler& inner) : inner_(inner) {}

  std::string name() const override { return inner_.name(); }
  std::vector<sampler::Index> indices(const sampler::ShardRequest& request) override;
  std::optional<std::int64_t> declaredLength(const sampler::ShardRequest& request) override;
  sampler::Partition partition(const sampler::SamplerCase& c) override;

  const std::vector<Exchange>& exchanges() const { return exchanges_; }
  void clear() { exchanges_.clear(); }

 private:
  sampler::Sampler& inner_;
  std::vector<Exchange> exchanges_;
};

/// The exchanges a property needs for case `c`, recorded by re-checking `property` on that case
/// alone. `violation` receives what the re-check found (nothing if the sampler does not repeat
/// its failure, i.e. it is not deterministic).
std::vector<Exchange> recordCase(sampler::Sampler& sampler, const sampler::SamplerCase& c,
                                 const sampler::Expectations& expectations,
                                 const std::string& property,
                                 std::optional<sampler::Violation>* violation = nullptr);

}  // namespace ddph::verify
