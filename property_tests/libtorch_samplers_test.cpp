// LibTorch's own C++ distributed samplers judged by PyTorch's DistributedSampler contract.
//
// The findings (which properties they violate, with the minimal counterexample) are printed and
// asserted, so a LibTorch upgrade that changes them shows up here; README.md documents them.
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "ddph/verify/counterexample_search.h"
#include "ddph/sampler/libtorch_samplers.h"

namespace ddph::sampler {

using verify::searchCounterexample;
using verify::SearchOptions;

namespace {

struct Finding {
  LibTorchSamplerKind kind;
  bool allowDuplicates;
  std::set<std::string> violated;  // expected, with LibTorch 1.13
};

void PrintTo(const Finding& f, std::ostream* os) {
  *os << LibTorchSampler(f.kind, f.allowDuplicates).name();
}

class LibTorchFindings : public ::testing::TestWithParam<Finding> {};

TEST_P(LibTorchFindings, violatesExactlyTheDocumentedProperties) {
  const auto& f = GetParam();
  LibTorchSampler sampler(f.kind, f.allowDuplicates);
  Expectations e;
  e.dropLast = !f.allowDuplicates;
  e.shuffle = f.kind == LibTorchSamplerKind::kRandom;
  SearchOptions options;
  options.seed = 1;
  std::set<std::string> violated;
  std::cout << sampler.name() << " against the pytorch contract (shuffle=" << e.shuffle
            << ", drop_last=" << e.dropLast << "):\n";
  for (const auto& name : distributedSamplerPropertyNames()) {
    const auto result = searchCounterexample(sampler, name, e, options);
    if (result.passed) {
      std::cout << "  ok   " << name << "\n";
      continue;
    }
    violated.insert(name);
    std::cout << "  FAIL " << name << " — minimal: " << formatCase(*result.counterexample)
              << "\n       " << result.violation->detail << "\n";
  }
  EXPECT_EQ(violated, f.violated);
}

INSTANTIATE_TEST_SUITE_P(
    LibTorch113, LibTorchFindings,
    ::testing::Values(
        Finding{LibTorchSamplerKind::kRandom, true, {"valid-range", "padding", "seed-plus-epoch"}},
        Finding{LibTorchSamplerKind::kRandom, false, {"seed-plus-epoch"}},
        Finding{LibTorchSamplerKind::kSequential, true, {"padding", "reshuffle"}},
        Finding{LibTorchSamplerKind::kSequential, false, {"reshuffle"}}),
    [](const auto& info) {
      return std::string(info.param.kind == LibTorchSamplerKind::kRandom ? "random" : "sequential") +
             (info.param.allowDuplicates ? "_padded" : "_dropLast");
    });

}  // namespace
}  // namespace ddph::sampler
