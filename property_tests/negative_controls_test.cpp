// Negative controls: every property can fail. Each deliberately broken sampler is caught by the
// property it breaks, and RapidCheck shrinks the failure to a small, readable counterexample.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include "broken_samplers.h"
#include "ddph/verify/counterexample_search.h"
#include "ddph/sampler/sampler_checks.h"

namespace ddph::sampler {

using verify::searchCounterexample;
using verify::SearchOptions;
using verify::SearchResult;

namespace {

class NegativeControls : public ::testing::TestWithParam<testing::BrokenCase> {};

TEST_P(NegativeControls, caughtByItsPropertyWithMinimalCounterexample) {
  const auto& broken = GetParam();
  auto sampler = broken.make();
  SearchOptions options;
  options.seed = 20261129;  // fixed: the same cases and the same shrink on every run
  const SearchResult result =
      searchCounterexample(*sampler, std::string(broken.caughtBy), Expectations{}, options);
  ASSERT_FALSE(result.passed) << broken.name << " was not caught by " << broken.caughtBy;
  ASSERT_TRUE(result.counterexample.has_value());
  ASSERT_TRUE(result.violation.has_value());
  EXPECT_EQ(result.violation->property, broken.caughtBy);
  const SamplerCase& c = *result.counterexample;
  std::cout << broken.name << ": minimal counterexample " << formatCase(c) << "\n  "
            << formatViolation(*result.violation) << "\n";
  // Shrunk: a handful of samples on a handful of ranks, first epochs, small seeds.
  EXPECT_LE(c.datasetSize, kReshuffleMinDatasetSize) << formatCase(c);
  EXPECT_LE(c.numReplicas, 3) << formatCase(c);
  EXPECT_LE(c.epoch, 1) << formatCase(c);
  EXPECT_LE(std::abs(c.seed), 1) << formatCase(c);
  // The minimal case really fails, and the port passes it.
  EXPECT_FALSE(checkSampler(*broken.make(), c, Expectations{}, {std::string(broken.caughtBy)}).empty());
  DistributedSampler port;
  EXPECT_TRUE(checkSampler(port, c, Expectations{}, distributedSamplerPropertyNames()).empty());
}

// The whole contract against each broken sampler: exactly the properties it breaks fail, each
// with a detail that says what is wrong; the rest hold (a control that trips everything proves
// nothing about which property is which).
TEST_P(NegativeControls, theWholeContractFailsExactlyWhatItBreaks) {
  const auto& broken = GetParam();
  ASSERT_TRUE(broken.breaks.count(std::string(broken.caughtBy))) << broken.name;
  auto sampler = broken.make();
  SearchOptions options;
  options.seed = 20261129;
  std::map<std::string, std::string> failed;
  for (const auto& property : distributedSamplerPropertyNames()) {
    const SearchResult r = searchCounterexample(*sampler, property, Expectations{}, options);
    if (!r.passed) failed[property] = r.violation->detail;
  }
  for (const auto& [property, detail] : failed) {
    ASSERT_TRUE(broken.breaks.count(property)) << broken.name << " also fails " << property << ": " << detail;
    EXPECT_NE(detail.find(broken.breaks.at(property)), std::string::npos)
        << broken.name << " " << property << ": " << detail;
  }
  for (const auto& [property, words] : broken.breaks) {
    EXPECT_TRUE(failed.count(property)) << broken.name << " passed " << property;
  }
}

// Every property the suite asserts of DistributedSampler has a broken sampler caught by it.
TEST(NegativeControlsCatalogue, everyPropertyHasAControl) {
  std::set<std::string> caught;
  for (const auto& broken : testing::brokenSamplers()) caught.emplace(broken.caughtBy);
  for (const auto& property : distributedSamplerPropertyNames()) {
    EXPECT_TRUE(caught.count(property)) << property << " has no negative control";
  }
}

INSTANTIATE_TEST_SUITE_P(BrokenSamplers, NegativeControls,
                         ::testing::ValuesIn(testing::brokenSamplers()),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           for (auto& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// A property that holds is reported as holding (the search is not biased towards failing).
TEST(CounterexampleSearch, passesForThePort) {
  DistributedSampler port;
  for (const auto& name : distributedSamplerPropertyNames()) {
    const auto result = searchCounterexample(port, name, Expectations{}, SearchOptions{});
    EXPECT_TRUE(result.passed) << name << ": " << (result.violation ? formatViolation(*result.violation) : "");
    EXPECT_EQ(result.casesPassed, 100) << name;
  }
}

}  // namespace
}  // namespace ddph::sampler
