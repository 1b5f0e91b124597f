// gradient-equivalence, property-tested: DDP over W Gloo thread ranks with a per-rank mean loss
// computes the gradients (every step) and the parameters (after k optimizer steps) of one process
// trained on the concatenated global batch — and the same checker reports the known-broken setups
// (the negative controls) as NOT equivalent, with a readable diagnosis.
//
// Case counts are kept small so the whole file runs in well under two minutes on 2 cores (each
// case starts W Gloo thread ranks and trains twice); RC_PARAMS="max_success=N" raises them all,
// RC_PARAMS="reproduce=…" replays a printed counterexample.
#include <gtest/gtest.h>

#include <algorithm>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <utility>

#include "ddph/ddp/gradient_equivalence.h"
#include "ddph/ddp/negative_controls.h"
#include "ddph/sampler/property.h"

namespace ddph::ddp {

using sampler::findProperty;
using sampler::formatViolation;
using sampler::PropertyInfo;
using sampler::Violation;
namespace property = sampler::property;

namespace {

// RC_GTEST_PROP with a per-property number of cases (unless RC_PARAMS sets max_success).
template <typename Testable>
void checkWithCases(Testable&& testable, int cases) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_case_name()) + "/" + info->name();
  metadata.description = info->name();
  auto params = rc::detail::configuration().testParams;
  const char* env = std::getenv("RC_PARAMS");
  if (env == nullptr || std::strstr(env, "max_success") == nullptr) params.maxSuccess = cases;
  const auto result = rc::detail::checkProperty(
      rc::detail::toProperty(std::forward<Testable>(testable)), metadata, params);
  if (result.template is<rc::detail::SuccessResult>()) {
    // The tags (world sizes, observed error magnitudes) as a distribution, like RC_GTEST_PROP.
    rc::detail::printResultMessage(result, std::cout);
    std::cout << std::endl;
  } else {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str();
  }
}

#define DDPH_RC_PROP(Suite, Name, Cases, ArgList)                  \
  void ddphProp_##Suite##_##Name ArgList;                          \
  TEST(Suite, Name) { checkWithCases(&ddphProp_##Suite##_##Name, Cases); } \
  void ddphProp_##Suite##_##Name ArgList

std::string violationsText(const ddp::EquivalenceReport& report) {
  std::string out;
  for (const auto& v : report.violations) out += "\n  " + formatViolation(v);
  return out;
}

rc::Gen<ddp::ModelSpec> genModel(bool allowConv, int maxWidth) {
  return rc::gen::exec([=] {
    ddp::ModelSpec m;
    m.kind =
        allowConv && *rc::gen::arbitrary<bool>() ? ddp::ModelKind::kConvNet : ddp::ModelKind::kMlp;
    if (m.kind == ddp::ModelKind::kMlp) {
      m.inputs = *rc::gen::inRange(1, maxWidth + 1).as("inputs");
      m.hidden = *rc::gen::container<std::vector<int>>(*rc::gen::inRange(0, 3),
                                                       rc::gen::inRange(1, maxWidth + 1))
                      .as("hidden widths");
    } else {
      m.inputs = *rc::gen::inRange(1, 3).as("channels");
      m.imageSize = *rc::gen::inRange(2, 6).as("image size");
      m.hidden = *rc::gen::container<std::vector<int>>(*rc::gen::inRange(1, 3),
                                                       rc::gen::inRange(1, 4))
                      .as("conv channels");
    }
    m.outputs = *rc::gen::inRange(1, 5).as("outputs");
    m.bias = *rc::gen::arbitrary<bool>();
    return m;
  });
}

rc::Gen<ddp::TrainingSetup> genSetup(ddp::Precision precision) {
  return rc::gen::exec([=] {
    ddp::TrainingSetup s;
    s.model = *genModel(true, 8);
    s.precision = precision;
    s.worldSize = *rc::gen::inRange(1, 9).as("world size");
    s.batchPerRank = *rc::gen::inRange(1, 5).as("batch per rank");
    s.steps = *rc::gen::inRange(1, 4).as("steps");
    s.optimizer = *rc::gen::element(ddp::OptimizerKind::kSgdMomentum, ddp::OptimizerKind::kAdam);
    s.learningRate = s.optimizer == ddp::OptimizerKind::kAdam ? 0.01 : 0.05;
    s.seed = *rc::gen::inRange<std::uint64_t>(1, 1000000).as("seed");
    // Small caps give many buckets (and a parameter bigger than the cap gets its own).
    s.bucketCapBytes = *rc::gen::element<std::size_t>(16, 256, 4096, std::size_t{25} << 20);
    return s;
  });
}

// "1e-07": the decade of an observed relative error, for the distribution RapidCheck prints.
std::string decade(double error) {
  if (error == 0.0) return "0 (exact)";
  return "<= 1e" + std::to_string(static_cast<int>(std::ceil(std::log10(error))));
}

void assertEquivalent(const ddp::TrainingSetup& s, const ddp::EquivalenceReport& report) {
  RC_TAG("gradients " + decade(report.maxGradientError),
         "parameters " + decade(report.maxParameterError));
  if (!report.equivalent()) {
    RC_FAIL(ddp::describeSetup(s) + violationsText(report));
  }
}

// --- Equivalence ---------------------------------------------------------------------------

DDPH_RC_PROP(GradientEquivalence, Float64MatchesSingleProcess, 40, ()) {
  const ddp::TrainingSetup s = *genSetup(ddp::Precision::kFloat64);
  assertEquivalent(s, ddp::checkGradientEquivalence(s));
}

DDPH_RC_PROP(GradientEquivalence, Float32MatchesSingleProcessWithinDocumentedTolerance, 40, ()) {
  const ddp::TrainingSetup s = *genSetup(ddp::Precision::kFloat32);
  assertEquivalent(s, ddp::checkGradientEquivalence(s));
}

// NOTE [Exact equality]: integer-valued weights and data, power-of-two sizes: no rounding at all,
// so DDP must be bit-for-bit the single process in float32 and float64 alike.
DDPH_RC_PROP(GradientEquivalence, IntegerValuedIsExact, 30, ()) {
  ddp::TrainingSetup s;
  s.model = *genModel(true, 6);
  s.model.outputs = *rc::gen::element(1, 2, 4).as("outputs");
  s.integerValued = true;
  s.precision = *rc::gen::element(ddp::Precision::kFloat32, ddp::Precision::kFloat64);
  s.worldSize = *rc::gen::element(1, 2, 4, 8).as("world size");
  s.batchPerRank = *rc::gen::element(1, 2, 4).as("batch per rank");
  s.steps = 1;
  s.optimizer = *rc::gen::element(ddp::OptimizerKind::kSgdMomentum, ddp::OptimizerKind::kAdam);
  s.seed = *rc::gen::inRange<std::uint64_t>(1, 1000000).as("seed");
  s.bucketCapBytes = *rc::gen::element<std::size_t>(16, 256, std::size_t{25} << 20);
  RC_PRE(ddp::exactSetup(s));
  const auto report = ddp::checkGradientEquivalence(s, ddp::Tolerance{0.0, 0.0});
  assertEquivalent(s, report);
  RC_ASSERT(report.maxGradientError == 0.0);
  RC_ASSERT(report.maxParameterError == 0.0);
}

// --- Negative controls: the same checker must say NOT equivalent, and why ------------------------

rc::Gen<ddp::TrainingSetup> genControl(int minWorld, int minBatch) {
  return rc::gen::exec([=] {
    ddp::TrainingSetup s;
    s.model = *genModel(false, 6);
    // A control must be able to fail: no hidden ReLU layers that could all be dead (zero
    // gradients make every reduction "equivalent"; seen with MLP 1-[1,1]-1), and a bias.
    s.model.hidden.clear();
    s.model.bias = true;
    s.worldSize = *rc::gen::inRange(minWorld, 6).as("world size");
    s.batchPerRank = *rc::gen::inRange(minBatch, 5).as("batch per rank");
    s.steps = 2;
    s.seed = *rc::gen::inRange<std::uint64_t>(1, 1000000).as("seed");
    return s;
  });
}

void assertNotEquivalent(const ddp::TrainingSetup& s, const ddp::NegativeControls& controls,
                         const ddp::EquivalenceReport& report, const std::string& expectedWords) {
  if (report.equivalent()) RC_FAIL("reported equivalent: " + ddp::describeSetup(s, controls));
  bool explained = false;
  for (const auto& v : report.violations) {
    RC_ASSERT(v.property == std::string(property::kGradientEquivalence));
    RC_ASSERT(!v.detail.empty());
    if (v.detail.find(expectedWords) != std::string::npos) explained = true;
  }
  if (!explained) {
    RC_FAIL("no violation says '" + expectedWords + "': " + ddp::describeSetup(s, controls) +
            violationsText(report));
  }
}

DDPH_RC_PROP(GradientEquivalenceControls, SumReducedLossIsNotEquivalent, 5, ()) {
  ddp::TrainingSetup s = *genControl(2, 1);
  s.loss = ddp::LossReduction::kSum;
  assertNotEquivalent(s, {}, ddp::checkGradientEquivalence(s), "exactly 1/W");
}

DDPH_RC_PROP(GradientEquivalenceControls, UnsyncedBatchNormIsNotEquivalent, 5, ()) {
  // Per-rank statistics must be able to differ from global ones: at least 3 samples a rank and 4
  // units a layer (with 1 unit and 2 samples, BatchNorm maps any pair to -1, +1 on every rank, and
  // unsynced statistics legitimately give the global gradients).
  ddp::TrainingSetup s = *genControl(2, 3);
  if (s.model.hidden.empty()) s.model.hidden = {4};
  for (auto& width : s.model.hidden) width = std::max(width, 4);
  s.model.batchNorm = true;
  assertNotEquivalent(s, {}, ddp::checkGradientEquivalence(s), "BatchNorm");
}

DDPH_RC_PROP(GradientEquivalenceControls, UnevenLastBatchIsNotEquivalent, 5, ()) {
  const ddp::TrainingSetup s = *genControl(2, 2);
  ddp::NegativeControls c;
  c.unevenLastBatch = true;
  assertNotEquivalent(s, c, ddp::checkGradientEquivalence(s, c), "batches of different sizes");
}

DDPH_RC_PROP(GradientEquivalenceControls, RankSkippingAStepIsNotEquivalent, 2, ()) {
  ddp::TrainingSetup s = *genControl(2, 1);
  s.steps = 3;
  ddp::NegativeControls c;
  c.skipRank = *rc::gen::inRange(0, s.worldSize).as("skipping rank");
  c.skipStep = *rc::gen::inRange(0, s.steps).as("skipped step");
  s.timeout = std::chrono::milliseconds(1500);  // its peers wait for it until then
  assertNotEquivalent(s, c, ddp::checkGradientEquivalence(s, c), "different numbers of steps");
}

DDPH_RC_PROP(GradientEquivalenceControls, NoInitialBroadcastIsNotEquivalent, 5, ()) {
  const ddp::TrainingSetup s = *genControl(2, 1);
  ddp::NegativeControls c;
  c.noInitialBroadcast = true;
  assertNotEquivalent(s, c, ddp::checkGradientEquivalence(s, c), "not broadcast from rank 0");
}

// --- Mutants of DistributedDataParallel itself (NOTE [DDP mutants]) ----------------------------

// MLP 4-[4]-4 in float64 with a bucket cap of 20 values: two buckets of equal size,
// [2.bias, 2.weight] then [0.bias, 0.weight] (reverse registration order), so buckets launched in
// another order pair without a size mismatch, as in a real model with equal buckets.
ddp::TrainingSetup mutantSetup() {
  ddp::TrainingSetup s;
  s.model.inputs = 4;
  s.model.hidden = {4};
  s.model.outputs = 4;
  s.worldSize = 4;
  s.batchPerRank = 2;
  s.steps = 2;
  s.bucketCapBytes = 20 * sizeof(double);
  return s;
}

ddp::NegativeControls mutant(ddp::DdpMutant m, int rank) {
  ddp::NegativeControls c;
  c.ddpMutant = m;
  c.mutantRank = rank;
  return c;
}

// The one violation at `step` whose detail holds every one of `words`.
void expectCaught(const ddp::TrainingSetup& s, const ddp::NegativeControls& c, std::int64_t step,
                  const std::vector<std::string>& words) {
  const auto report = ddp::checkGradientEquivalence(s, c);
  EXPECT_EQ(report.buckets, 2) << ddp::describeSetup(s, c);
  ASSERT_FALSE(report.equivalent()) << ddp::describeSetup(s, c);
  const Violation* atStep = nullptr;
  for (const auto& v : report.violations) {
    EXPECT_EQ(v.property, property::kGradientEquivalence);
    if (v.step == step && atStep == nullptr) atStep = &v;
  }
  ASSERT_NE(atStep, nullptr) << "nothing at step " << step << ":" << violationsText(report);
  std::cout << ddp::describeSetup(s, c) << "\n  " << atStep->detail
            << "\n";  // real output for ddp.md
  for (const auto& w : words) {
    EXPECT_NE(atStep->detail.find(w), std::string::npos)
        << "'" << w << "' is not in: " << atStep->detail;
  }
}

TEST(DdpMutants, TheUnmutatedSetupIsEquivalent) {
  const auto report =
      ddp::checkGradientEquivalence(mutantSetup(), mutant(ddp::DdpMutant::kNone, -1));
  EXPECT_EQ(report.buckets, 2);
  EXPECT_TRUE(report.equivalent()) << violationsText(report);
}

TEST(DdpMutants, SummedGradientsAreWTimesTooLarge) {
  expectCaught(mutantSetup(), mutant(ddp::DdpMutant::kSumNotAverage, -1), 0,
               {"every DDP gradient is exactly W = 4 times the single-process one",
                "summed over ranks instead of averaged"});
}

TEST(DdpMutants, ABucketNeverReducedIsNamedWithItsParameters) {
  expectCaught(mutantSetup(), mutant(ddp::DdpMutant::kSkipLastBucket, -1), 0,
               {"every rank holds its own gradient of '0.weight', '0.bias'",
                "exactly bucket 1 of 2", "that bucket was never allreduced"});
}

TEST(DdpMutants, NoAllreduceAtAllLeavesEveryRankItsOwnGradients) {
  expectCaught(mutantSetup(), mutant(ddp::DdpMutant::kSkipAllreduce, -1), 0,
               {"nothing was averaged across ranks (the allreduce was skipped)"});
}

TEST(DdpMutants, BucketsLaunchedInAnotherOrderOnOneRankAreNamed) {
  expectCaught(mutantSetup(), mutant(ddp::DdpMutant::kReverseBuckets, 2), 0,
               {"rank(s) 2 hold gradients of", "different from the other 3 ranks'",
                "paired different buckets"});
}

TEST(DdpMutants, NoBroadcastAtConstructionWithPerRankSeeds) {
  ddp::NegativeControls c;
  c.noInitialBroadcast = true;  // each rank initialises from seed + rank; DDP broadcasts nothing
  expectCaught(mutantSetup(), c, 0,
               {"the replicas started from different weights", "not broadcast from rank 0"});
}

// The "W times" diagnosis on generated setups too, not one hand-picked model.
DDPH_RC_PROP(GradientEquivalenceControls, SummingDdpIsWTimesTooLarge, 5, ()) {
  const ddp::TrainingSetup s = *genControl(2, 1);
  const ddp::NegativeControls c = mutant(ddp::DdpMutant::kSumNotAverage, -1);
  assertNotEquivalent(s, c, ddp::checkGradientEquivalence(s, c), "exactly W = ");
}

// The catalogue knows the property, and each control's report reads as documented (printed, so
// the README can show real output).
TEST(GradientEquivalenceControls, ReportsAreReadable) {
  const PropertyInfo* info = findProperty(property::kGradientEquivalence);
  ASSERT_NE(info, nullptr);
  std::cout << info->name << ": " << info->summary << "\n  likely cause: " << info->likelyCause
            << "\n";
  ddp::TrainingSetup base;
  base.worldSize = 4;
  base.batchPerRank = 3;
  base.model.hidden = {8};
  std::vector<std::pair<ddp::TrainingSetup, ddp::NegativeControls>> controls(5, {base, {}});
  controls[0].first.loss = ddp::LossReduction::kSum;
  controls[1].first.model.batchNorm = true;
  controls[2].second.unevenLastBatch = true;
  controls[3].second.skipRank = 2;
  controls[3].second.skipStep = 1;
  controls[3].first.steps = 3;
  controls[3].first.timeout = std::chrono::milliseconds(1500);
  controls[4].second.noInitialBroadcast = true;
  const ddp::TrainingSetup correct = base;
  const auto ok = ddp::checkGradientEquivalence(correct);
  std::cout << "\n"
            << ddp::describeSetup(correct) << "\n  equivalent: " << ok.equivalent()
            << " (max relative gradient error " << ok.maxGradientError << ", " << ok.buckets
            << " bucket(s))\n";
  EXPECT_TRUE(ok.equivalent()) << violationsText(ok);
  for (const auto& [s, c] : controls) {
    const auto report = ddp::checkGradientEquivalence(s, c);
    std::cout << "\n" << ddp::describeSetup(s, c) << violationsText(report) << "\n";
    ASSERT_FALSE(report.equivalent());
    for (const auto& v : report.violations) EXPECT_EQ(v.property, "gradient-equivalence");
  }
}

}  // namespace
}  // namespace ddph::ddp
