// Elastic resume (NOTE [Elastic resume]): the C++ ElasticSampler is DistributedSampler when never
// resumed and keeps the `elastic` contract; each naive resume is caught by the whole contract,
// by exactly the property it breaks, with a detail that names what it does.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "ddph/common/error.h"
#include "ddph/verify/case_gen.h"
#include "ddph/verify/contract.h"
#include "ddph/verify/counterexample_search.h"
#include "ddph/sampler/elastic_sampler.h"
#include "ddph/sampler/resume_checks.h"

namespace ddph::sampler {

using common::ConfigError;
using verify::findContract;
using verify::searchCounterexample;
using verify::SearchOptions;

namespace {

// Never resumed, the elastic sampler is PyTorch's, index for index and length for length.
RC_GTEST_PROP(ElasticSampler, neverResumedIsDistributedSampler, ()) {
  const auto c = *rc::gen::arbitrary<SamplerCase>().as("case");
  DistributedSamplerOptions options;
  options.dropLast = *rc::gen::arbitrary<bool>().as("drop_last");
  options.shuffle = *rc::gen::arbitrary<bool>().as("shuffle");
  DistributedSampler pytorch(options);
  ElasticSampler elastic(options);
  const auto rank = *rc::gen::inRange<std::int64_t>(0, c.numReplicas).as("rank");
  RC_ASSERT(elastic.indices(c.forRank(rank)) == pytorch.indices(c.forRank(rank)));
  RC_ASSERT(elastic.declaredLength(c.forRank(rank)) == pytorch.declaredLength(c.forRank(rank)));
}

// Resumed on the same world size, the rest of the epoch is the uninterrupted run's tail, padding
// included, with and without drop_last.
RC_GTEST_PROP(ElasticSampler, sameWorldSizeContinuesTheUninterruptedRun, ()) {
  const auto c = *rc::gen::arbitrary<SamplerCase>().as("case");
  DistributedSamplerOptions options;
  options.dropLast = *rc::gen::arbitrary<bool>().as("drop_last");
  ElasticSampler elastic(options);
  const std::int64_t length = distributedNumSamples(c.datasetSize, c.numReplicas, options.dropLast);
  const auto consumed = *rc::gen::inRange<std::int64_t>(0, length + 1).as("consumed");
  const auto rank = *rc::gen::inRange<std::int64_t>(0, c.numReplicas).as("rank");
  auto whole = elastic.indices(c.forRank(rank));
  ShardRequest resumed = c.forRank(rank);
  resumed.resume = {{c.numReplicas, consumed}};
  whole.erase(whole.begin(), whole.begin() + consumed);
  RC_ASSERT(elastic.indices(resumed) == whole);
}

TEST(ElasticSampler, KeepsTheElasticContractWithAndWithoutDropLast) {
  for (const bool dropLast : {false, true}) {
    DistributedSamplerOptions options;
    options.dropLast = dropLast;
    ElasticSampler elastic(options);
    Expectations e;
    e.dropLast = dropLast;
    for (const auto& property : findContract("elastic").properties) {
      const auto r = searchCounterexample(elastic, property, e, SearchOptions{});
      EXPECT_TRUE(r.passed) << property << " drop_last=" << dropLast << ": "
                            << (r.violation ? formatViolation(*r.violation) : "");
    }
  }
}

TEST(ElasticSampler, TwoResumesInOneEpochTakeEverySampleOnce) {
  ElasticSampler elastic;
  // 100 samples: 4 ranks take 5 each, 3 ranks take 7 each, 2 ranks take the 59 left (one pad).
  SamplerCase c{100, 2, 3, 11, {{4, 5}, {3, 7}}};
  const ResumedEpoch e = askResumedEpoch(elastic, c);
  EXPECT_FALSE(checkResumeExactlyOnce(e, Expectations{}).has_value());
  EXPECT_FALSE(checkResumeBalance(e).has_value());
  ASSERT_EQ(e.runs.size(), 3u);
  EXPECT_EQ(e.runs[2].ranks[0].size(), 30u);
}

TEST(ElasticSampler, ImpossibleResumePointsAreConfigErrors) {
  ElasticSampler elastic;
  EXPECT_THROW(elastic.indices({10, 2, 0, 0, 0, {{4, 4}}}), ConfigError);  // 4 ranks yield 3 at most
  EXPECT_EQ(elastic.indices({10, 2, 0, 0, 0, {{4, 3}}}), std::vector<Index>{});  // into the padding
  EXPECT_THROW(elastic.indices({10, 2, 0, 0, 0, {{0, 1}}}), ConfigError);
  EXPECT_THROW(parseResumePoints("4:3,"), ConfigError);
  EXPECT_THROW(parseResumePoints("4"), ConfigError);
  EXPECT_EQ(parseResumePoints("4:3,2:1"), (std::vector<ResumePoint>{{4, 3}, {2, 1}}));
  EXPECT_EQ(formatResumePoints({{4, 3}, {2, 1}}), "4:3,2:1");
}

TEST(ElasticState, RoundTripsThroughJsonAndRefusesBadState) {
  ElasticState s{3, 7, 4, 13, {{8, 2}}};
  const ElasticState back = ElasticState::fromJson(s.toJson());
  EXPECT_EQ(back.toJson(), s.toJson());
  EXPECT_EQ(back.resumeHistory(), (std::vector<ResumePoint>{{8, 2}, {4, 13}}));
  EXPECT_THROW(ElasticState::fromJson("{\"version\":2}"), ConfigError);
  EXPECT_THROW(ElasticState::fromJson("not json"), ConfigError);
  EXPECT_THROW(ElasticState::fromJson(R"({"version":1,"epoch":0,"seed":0,"num_replicas":0,)"
                                      R"("consumed":0,"history":[]})"),
               ConfigError);
}

// ---- Naive resumes: each a sampler that is DistributedSampler until resumed. ----

using Resume = std::function<std::vector<Index>(const ShardRequest&)>;

class NaiveResume final : public Sampler {
 public:
  NaiveResume(std::string name, Resume resume) : name_(std::move(name)), resume_(std::move(resume)) {}
  std::string name() const override { return name_; }
  std::vector<Index> indices(const ShardRequest& r) override {
    return r.resume.empty() ? elastic_.indices(r) : resume_(r);
  }

 private:
  std::string name_;
  Resume resume_;
  ElasticSampler elastic_;
};

std::vector<Index> order(const ShardRequest& r, std::int64_t epochShift = 0) {
  return distributedEpochOrder(r.datasetSize, r.seed, r.epoch + epochShift, {});
}

struct NaiveCase {
  std::string name;
  Resume resume;
  /// The contract's properties it must fail, and only those, each with what its detail says.
  std::map<std::string, std::string> failing;
};

std::vector<NaiveCase> naiveResumes() {
  return {
      {"restarts-the-epoch",  // torch's DistributedSampler: it has no resume state
       [](const ShardRequest& r) { return distributedShard(order(r), r, false); },
       {{"resume-exactly-once", "ignores the resume and restarts the epoch"},
        {"resume-order", "where the uninterrupted run yields"}}},
      {"keeps-per-rank-positions",  // each rank skips what it consumed of its shard on W'
       [](const ShardRequest& r) {
         auto shard = distributedShard(order(r), r, false);
         const auto skip = std::min<std::int64_t>(r.resume.back().consumed, shard.size());
         shard.erase(shard.begin(), shard.begin() + skip);
         return shard;
       },
       {{"resume-exactly-once", "per-rank positions kept across the change of world size"}}},
      {"no-padding-after-resume",  // the rest strided without padding: uneven shards
       [](const ShardRequest& r) {
         const auto o = order(r);
         std::vector<Index> shard;
         for (std::int64_t p = elasticRunStart(r.datasetSize, r.resume, false) + r.rank;
              p < r.datasetSize; p += r.numReplicas) {
           shard.push_back(o[p]);
         }
         return shard;
       },
       {{"resume-order", "yields nothing where the uninterrupted run yields"},
        {"resume-balance", "the ranks run different numbers of steps"}}},
      {"re-draws-the-rest",  // the rest in a fresh order: a second resume then repeats samples
       [](const ShardRequest& r) {
         const auto start = elasticRunStart(r.datasetSize, r.resume, false);
         auto o = order(r);
         auto fresh = order(r, 1000);
         std::vector<Index> rest(o.begin() + start, o.end());
         std::stable_sort(rest.begin(), rest.end(), [&](Index a, Index b) { return fresh[a] < fresh[b]; });
         std::vector<Index> shuffled(o.begin(), o.begin() + start);
         shuffled.insert(shuffled.end(), rest.begin(), rest.end());
         return elasticShard(shuffled, r, false);
       },
       {{"resume-exactly-once", "extra copies where padding allows 0"},
        {"resume-order", "where the uninterrupted run yields"}}},
      {"pads-with-the-rests-head",  // the resumed run padded from its own head, not the epoch's
       [](const ShardRequest& r) {
         const auto start = elasticRunStart(r.datasetSize, r.resume, false);
         const auto o = order(r);
         const std::vector<Index> rest(o.begin() + start, o.end());
         ShardRequest sub = r;
         sub.datasetSize = static_cast<std::int64_t>(rest.size());
         sub.resume.clear();
         return distributedShard(rest, sub, false);
       },
       {{"resume-order", "where the uninterrupted run yields"}}},
  };
}

class NaiveResumes : public ::testing::TestWithParam<NaiveCase> {};

TEST_P(NaiveResumes, TheWholeContractCatchesExactlyWhatItBreaks) {
  const NaiveCase& naive = GetParam();
  NaiveResume sampler(naive.name, naive.resume);
  std::map<std::string, std::string> failing;  // property -> the minimal violation's detail
  SearchOptions options;
  options.seed = 20261201;
  for (const auto& property : findContract("elastic").properties) {
    const auto r = searchCounterexample(sampler, property, Expectations{}, options);
    if (r.passed) continue;
    ASSERT_TRUE(r.violation.has_value());
    EXPECT_EQ(r.violation->property, property);
    failing[property] = r.violation->detail;
    std::cout << naive.name << ": " << formatCase(*r.counterexample) << "\n  "
              << formatViolation(*r.violation) << "\n";
  }
  ASSERT_EQ(failing.size(), naive.failing.size()) << naive.name;
  for (const auto& [property, says] : naive.failing) {
    ASSERT_TRUE(failing.count(property)) << naive.name << " passed " << property;
    EXPECT_NE(failing[property].find(says), std::string::npos) << failing[property];
  }
}

INSTANTIATE_TEST_SUITE_P(Elastic, NaiveResumes, ::testing::ValuesIn(naiveResumes()),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           for (auto& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// Every resume property of the catalogue is the one a naive resume above is caught by.
TEST(NaiveResumes, EveryResumePropertyHasANegativeControl) {
  std::set<std::string> covered;
  for (const auto& naive : naiveResumes()) {
    for (const auto& entry : naive.failing) covered.insert(entry.first);
  }
  for (const auto& p : samplerProperties()) {
    if (isResumeProperty(p.name)) {
      EXPECT_TRUE(covered.count(std::string(p.name))) << p.name;
    }
  }
}

}  // namespace
}  // namespace ddph::sampler
