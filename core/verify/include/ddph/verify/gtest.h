#pragma once
// GoogleTest glue for contracts: check a sampler in one line of a test.
//
//   TEST(MySampler, KeepsPyTorchsContract) {
//     MySampler sampler;
//     EXPECT_TRUE(ddph::verify::testing::satisfiesContract(sampler, "pytorch"));
//   }
//
// On failure the assertion message is formatContractResult's report: each violated property with
// its minimal case and likely cause. Header-only, so ddph::verify itself does not link GoogleTest.

#include <gtest/gtest.h>

#include <string_view>

#include "ddph/common/error.h"
#include "ddph/verify/contract.h"

namespace ddph::verify::testing {

/// Success when `sampler` keeps every property of `contract`; a failure carrying the report
/// otherwise (also when the sampler throws instead of answering).
inline ::testing::AssertionResult satisfiesContract(sampler::Sampler& sampler,
                                                    const Contract& contract,
                                                    const SearchOptions& options = {}) {
  try {
    const ContractResult result = checkContract(sampler, contract, options);
    if (result.passed()) return ::testing::AssertionSuccess() << formatContractResult(result);
    return ::testing::AssertionFailure() << formatContractResult(result);
  } catch (const common::Error& e) {
    return ::testing::AssertionFailure()
           << "sampler '" << sampler.name() << "' could not be checked against contract '"
           << contract.name << "': " << e.what();
  }
}

/// The built-in contract `contractName` ("pytorch", "drop-last", "exactly-once",
/// "with-replacement").
inline ::testing::AssertionResult satisfiesContract(sampler::Sampler& sampler,
                                                    std::string_view contractName,
                                                    const SearchOptions& options = {}) {
  try {
    return satisfiesContract(sampler, findContract(contractName), options);
  } catch (const common::Error& e) {
    return ::testing::AssertionFailure() << e.what();
  }
}

}  // namespace ddph::verify::testing
