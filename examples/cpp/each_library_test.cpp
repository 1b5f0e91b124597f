// Every library of the INSTALLED package, linked and used from a user's project: one real call
// into each (the DDP step and the sampler checks have their own tests beside this one).
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ddph/audit/audit_page.h"
#include "ddph/trace/trace.h"
#include "ddph/comm/gloo_communicator.h"
#include "ddph/common/atomic_file.h"
#include "ddph/common/error.h"
#include "ddph/data/dataset_mix.h"
#include "ddph/launch/launcher.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/scenario/builtin_scenarios.h"
#include "ddph/train/train_config.h"
#include "ddph/verify/contract.h"

namespace fs = std::filesystem;

TEST(InstalledLibraries, CommonWritesAFileAtomically) {  // ddph::common
  const fs::path dir = fs::temp_directory_path() / ("ddph-each-library-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ddph::common::writeFileAtomically(dir / "report.json", "{}\n");
  std::ifstream in(dir / "report.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  EXPECT_EQ(text, "{}\n");
}

TEST(InstalledLibraries, SamplerKnowsPyTorchsPadding) {  // ddph::sampler
  ddph::sampler::DistributedSampler sampler;
  const auto p = sampler.partition({10, 3, 0, 0});
  ASSERT_EQ(p.ranks.size(), 3u);
  for (const auto& shard : p.ranks) EXPECT_EQ(shard.size(), 4u);  // 12 slots: 2 padded
}

TEST(InstalledLibraries, VerifySearchesThePortsCoverage) {  // ddph::verify (RapidCheck inside)
  ddph::sampler::DistributedSampler sampler;
  const auto r = ddph::verify::searchCounterexample(sampler, "coverage", {}, {});
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.casesPassed, 100);
}

TEST(InstalledLibraries, CommGivesEachRankItsLoopbackAddress) {  // ddph::comm
  EXPECT_EQ(ddph::comm::loopbackAddressForRank(0), "127.0.1.1");
  EXPECT_EQ(ddph::comm::loopbackAddressForRank(251), "127.0.2.2");
}

TEST(InstalledLibraries, LaunchDescribesARankThatDied) {  // ddph::launch
  ddph::launch::RankOutcome outcome;
  outcome.rank = 2;
  outcome.pid = 4711;
  outcome.kind = ddph::launch::RankOutcome::Kind::kSignaled;
  outcome.signal = SIGTERM;
  EXPECT_EQ(ddph::launch::describeOutcome(outcome),
            "rank 2 (pid 4711) was killed by signal 15 (SIGTERM)");
}

TEST(InstalledLibraries, DataZipStopsAtTheShorterDataset) {  // ddph::data
  const auto steps = ddph::data::planEpoch({{0, 1, 2, 3}, {10, 11}}, 1, ddph::data::Mix::kZip);
  EXPECT_EQ(steps.size(), 2u);
  EXPECT_THROW(ddph::data::parseMix("interleave"), ddph::common::ConfigError);
}

TEST(InstalledLibraries, TraceRefusesAMissingTraceFolder) {  // ddph::trace
  EXPECT_THROW(ddph::trace::readTrace("/nonexistent/ddph-trace"), ddph::common::Error);
}

TEST(InstalledLibraries, AuditJudgesTheCatalogueProperties) {  // ddph::audit
  const auto& judged = ddph::audit::auditedProperties();
  EXPECT_NE(std::find(judged.begin(), judged.end(), "coverage"), judged.end());
}

TEST(InstalledLibraries, ScenarioCatalogueHasTheClassicBugs) {  // ddph::scenario
  EXPECT_TRUE(ddph::scenario::isBuiltinScenario("healthy"));
  EXPECT_TRUE(ddph::scenario::isBuiltinScenario("missing-set-epoch"));
}

TEST(InstalledLibraries, TrainParsesItsBackends) {  // ddph::train
  EXPECT_EQ(ddph::train::backendName(ddph::train::parseBackend("gloo")), "gloo");
}
