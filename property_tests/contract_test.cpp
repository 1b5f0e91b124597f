// Contracts: the built-in ones hold for the samplers they describe, and each property a contract
// adds is caught failing by a deliberately broken sampler, with the minimal counterexample.
#include <gtest/gtest.h>

#include <random>

#include "ddph/common/error.h"
#include "ddph/verify/contract.h"
#include "ddph/verify/gtest.h"
#include "ddph/sampler/distributed_sampler.h"

namespace ddph::verify {

using common::ConfigError;
using common::ProtocolError;
using sampler::DistributedSampler;
using sampler::Expectations;
using sampler::formatCase;
using sampler::Index;
using sampler::Sampler;
using sampler::ShardRequest;
using sampler::Violation;
namespace property = sampler::property;

namespace {

SearchOptions quick(int cases = 100) {
  SearchOptions o;
  o.cases = cases;
  o.seed = 12345;
  return o;
}

// Evaluation sharding done right: rank r takes 0..N-1 strided, no padding.
class StridedEvalSampler : public Sampler {
 public:
  std::string name() const override { return "strided-eval"; }
  std::vector<Index> indices(const ShardRequest& r) override {
    std::vector<Index> out;
    for (Index i = r.rank; i < r.datasetSize; i += r.numReplicas) out.push_back(i);
    return out;
  }
};

// Broken evaluation sharding: floor(N / W) each, the last rank takes the whole remainder.
class RemainderToLastSampler : public Sampler {
 public:
  std::string name() const override { return "remainder-to-last"; }
  std::vector<Index> indices(const ShardRequest& r) override {
    const std::int64_t chunk = r.datasetSize / r.numReplicas;
    const std::int64_t end = r.rank == r.numReplicas - 1 ? r.datasetSize : (r.rank + 1) * chunk;
    std::vector<Index> out;
    for (Index i = r.rank * chunk; i < end; ++i) out.push_back(i);
    return out;
  }
};

// Weighted-style sampling with replacement: one draw of ceil(N / W) * W indices seeded with
// seed + epoch, rank r takes its stride. `forgetsRank` draws the same and skips the stride:
// every rank trains on the same samples.
class ReplacementSampler : public Sampler {
 public:
  explicit ReplacementSampler(bool forgetsRank) : forgetsRank_(forgetsRank) {}
  std::string name() const override { return forgetsRank_ ? "replacement-no-stride" : "replacement"; }
  std::vector<Index> indices(const ShardRequest& r) override {
    const std::int64_t perRank = (r.datasetSize + r.numReplicas - 1) / r.numReplicas;
    if (r.datasetSize == 0) return {};
    std::mt19937_64 gen(static_cast<std::uint64_t>(r.seed + r.epoch));
    std::uniform_int_distribution<Index> pick(0, r.datasetSize - 1);
    std::vector<Index> draw(static_cast<std::size_t>(perRank * r.numReplicas));
    for (auto& i : draw) i = pick(gen);
    std::vector<Index> out;
    if (forgetsRank_) return {draw.begin(), draw.begin() + perRank};
    for (std::size_t k = static_cast<std::size_t>(r.rank); k < draw.size();
         k += static_cast<std::size_t>(r.numReplicas)) {
      out.push_back(draw[k]);
    }
    return out;
  }

 private:
  bool forgetsRank_;
};

// A sampler whose process "crashes": a protocol failure, not a counterexample.
class CrashingSampler : public Sampler {
 public:
  std::string name() const override { return "crashing"; }
  std::vector<Index> indices(const ShardRequest&) override {
    throw ProtocolError("sampler 'crashing' exited with code 3");
  }
};

const SearchResult& resultFor(const ContractResult& r, const std::string& property) {
  for (const auto& s : r.results) {
    if (s.property == property) return s;
  }
  throw std::runtime_error("no result for " + property);
}

TEST(Contract, BuiltinContractsNameKnownProperties) {
  ASSERT_GE(builtinContracts().size(), 4u);
  for (const auto& c : builtinContracts()) {
    EXPECT_NO_THROW(validateContract(c)) << c.name;
    EXPECT_EQ(&findContract(c.name), &c);
  }
  EXPECT_EQ(findContract("pytorch").properties,
            (std::vector<std::string>{"valid-range", "equal-length", "coverage", "disjointness",
                                      "reshuffle", "determinism", "seed-plus-epoch"}));
  EXPECT_TRUE(findContract("drop-last").expectations.dropLast);
  EXPECT_THROW(findContract("no-such-contract"), ConfigError);
  EXPECT_THROW(validateContract({"mine", "", {"coverage", "typo"}, {}}), ConfigError);
  EXPECT_THROW(validateContract({"empty", "", {}, {}}), ConfigError);
}

TEST(Contract, PortKeepsPytorchAndDropLast) {
  DistributedSampler shuffled;
  EXPECT_TRUE(testing::satisfiesContract(shuffled, "pytorch", quick()));
  DistributedSampler dropLast({/*shuffle=*/true, /*dropLast=*/true});
  EXPECT_TRUE(testing::satisfiesContract(dropLast, "drop-last", quick()));
  // …and they are not interchangeable: the padded sampler breaks drop_last's lengths.
  const ContractResult wrong = checkContract(shuffled, "drop-last", quick());
  EXPECT_FALSE(wrong.passed());
  EXPECT_FALSE(resultFor(wrong, "equal-length").passed);
}

TEST(Contract, ExactlyOnceHoldsForStridedEvalAndCatchesPadding) {
  StridedEvalSampler eval;
  EXPECT_TRUE(testing::satisfiesContract(eval, "exactly-once", quick()));
  // DistributedSampler pads: index 0 is on both ranks at N=1, W=2.
  DistributedSampler padded;
  const ContractResult r = checkContract(padded, "exactly-once", quick());
  const SearchResult& dup = resultFor(r, "no-duplicates");
  ASSERT_FALSE(dup.passed);
  EXPECT_EQ(formatCase(*dup.counterexample), "N=1 W=2 epoch=0 seed=0");
  EXPECT_EQ(dup.violation->ranks, (std::vector<std::int64_t>{0, 1}));
  EXPECT_TRUE(resultFor(r, "coverage").passed);
  EXPECT_TRUE(resultFor(r, "balanced-length").passed);
}

TEST(Contract, BalancedLengthCatchesRemainderOnOneRank) {
  RemainderToLastSampler broken;
  const ContractResult r = checkContract(broken, "exactly-once", quick());
  const SearchResult& balanced = resultFor(r, "balanced-length");
  ASSERT_FALSE(balanced.passed);
  // The smallest world where one rank can be two ahead: N=2 on W=3 gives lengths 0, 0, 2.
  EXPECT_EQ(formatCase(*balanced.counterexample), "N=2 W=3 epoch=0 seed=0");
  EXPECT_TRUE(resultFor(r, "no-duplicates").passed);
  EXPECT_TRUE(resultFor(r, "coverage").passed);
}

TEST(Contract, WithReplacementHoldsForStridedDrawAndCatchesSharedDraw) {
  ReplacementSampler good(false);
  EXPECT_TRUE(testing::satisfiesContract(good, "with-replacement", quick()));
  ReplacementSampler noStride(true);
  const ContractResult r = checkContract(noStride, "with-replacement", quick());
  const SearchResult& agree = resultFor(r, "ranks-agree");
  ASSERT_FALSE(agree.passed);
  // Identical shards count only when a chance match is below 2^-40: 10 indices from N=19
  // (10 * log2(19) = 42.5 bits) is the smallest such case on two ranks.
  EXPECT_EQ(formatCase(*agree.counterexample), "N=19 W=2 epoch=0 seed=0");
  EXPECT_TRUE(resultFor(r, "valid-range").passed);
  EXPECT_TRUE(resultFor(r, "equal-length").passed);
  EXPECT_TRUE(resultFor(r, "determinism").passed);
  // A sampler without replacement never trips ranks-agree (padding copies are single indices).
  DistributedSampler port;
  const Contract agreeOnly{"agree", "", {"ranks-agree"}, {}};
  EXPECT_TRUE(checkContract(port, agreeOnly, quick()).passed());
}

TEST(Contract, UsersComposeTheirOwn) {
  RemainderToLastSampler broken;
  const Contract mine{"mine", "covers everything once", {"valid-range", "coverage", "no-duplicates"},
                      Expectations{}};
  EXPECT_TRUE(testing::satisfiesContract(broken, mine, quick()));
}

TEST(Contract, ReportNamesTheMinimalCaseAndCause) {
  RemainderToLastSampler broken;
  const ::testing::AssertionResult verdict =
      testing::satisfiesContract(broken, "exactly-once", quick());
  ASSERT_FALSE(verdict);
  const std::string report = verdict.message();
  EXPECT_NE(report.find("FAIL balanced-length"), std::string::npos) << report;
  EXPECT_NE(report.find("minimal case N=2 W=3 epoch=0 seed=0"), std::string::npos) << report;
  EXPECT_NE(report.find("likely cause:"), std::string::npos) << report;
  EXPECT_NE(report.find("contract 'exactly-once' violated: 1 of 4 properties (balanced-length)"),
            std::string::npos)
      << report;
}

TEST(Contract, SamplerFailureIsAProtocolErrorNotACounterexample) {
  CrashingSampler crashing;
  EXPECT_THROW(checkContract(crashing, "pytorch", quick(5)), ProtocolError);
  const auto verdict = testing::satisfiesContract(crashing, "pytorch", quick(5));
  EXPECT_FALSE(verdict);
  EXPECT_NE(std::string(verdict.message()).find("exited with code 3"), std::string::npos);
}

TEST(Contract, RecordCaseReplaysWhatThePropertyAsked) {
  RemainderToLastSampler broken;
  std::optional<Violation> v;
  const auto exchanges =
      recordCase(broken, {2, 3, 0, 0}, findContract("exactly-once").expectations,
                 "balanced-length", &v);
  ASSERT_TRUE(v.has_value());
  ASSERT_EQ(exchanges.size(), 3u);
  EXPECT_EQ(exchanges[2].request.rank, 2);
  EXPECT_EQ(exchanges[2].indices, (std::vector<Index>{0, 1}));
  // Determinism asks the same partition twice; seed-plus-epoch the seed + 1 / epoch - 1 one too.
  DistributedSampler port;
  const auto asked = recordCase(port, {5, 2, 1, 7}, Expectations{}, "determinism", &v);
  EXPECT_FALSE(v.has_value());
  EXPECT_EQ(asked.size(), 4u);
  const auto shifted = recordCase(port, {5, 2, 1, 7}, Expectations{}, "seed-plus-epoch", &v);
  EXPECT_FALSE(v.has_value());
  EXPECT_EQ(shifted.size(), 4u);
  EXPECT_EQ(shifted[2].request.seed, 8);
  EXPECT_EQ(shifted[2].request.epoch, 0);
}

}  // namespace
}  // namespace ddph::verify
