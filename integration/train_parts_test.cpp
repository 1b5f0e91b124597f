// The torch-free pieces of ddp-train: option validation, the progress display, the JSON report.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "ddph/common/error.h"
#include "ddph/train/progress.h"
#include "ddph/train/train_config.h"
#include "ddph/train/training_report.h"

namespace ddph::train {
namespace {

std::string capture(ProgressMode mode, std::int64_t steps) {
  std::FILE* file = std::tmpfile();
  {
    ProgressReporter progress(mode, file);
    progress.startEpoch(0, 2, 0, steps);
    for (std::int64_t s = 0; s < steps; ++s) {
      if (progress.wantsLoss(s)) progress.update(s, 0.5, (s + 1) * 64);
    }
    progress.finishEpoch();
  }
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(c));
  std::fclose(file);
  return text;
}

TEST(TrainProgress, LinesModePrintsAboutTenLinesAndNoCarriageReturns) {
  const std::string text = capture(ProgressMode::kLines, 100);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("epoch 1/2 step 100/100 loss 0.5000"), std::string::npos) << text;
  EXPECT_NE(text.find("ETA 0:00"), std::string::npos) << text;
}

TEST(TrainProgress, AutoModeOnAFileIsLinesAndBarModeRedrawsInPlace) {
  const std::string autoText = capture(ProgressMode::kAuto, 20);  // a file is not a terminal
  EXPECT_EQ(std::count(autoText.begin(), autoText.end(), '\n'), 10) << autoText;
  EXPECT_EQ(capture(ProgressMode::kAuto, 20).find('\r'), std::string::npos);
  const std::string bar = capture(ProgressMode::kBar, 20);
  EXPECT_NE(bar.find("\repoch 1/2 [########################] 20/20"), std::string::npos) << bar;
  EXPECT_EQ(std::count(bar.begin(), bar.end(), '\n'), 1);
  EXPECT_EQ(capture(ProgressMode::kNone, 20), "");
}

TEST(TrainProgress, Durations) {
  EXPECT_EQ(ProgressReporter::formatDuration(0), "0:00");
  EXPECT_EQ(ProgressReporter::formatDuration(125), "2:05");
  EXPECT_EQ(ProgressReporter::formatDuration(3723), "1:02:03");
  EXPECT_EQ(ProgressReporter::formatDuration(-1), "?");
}

TEST(TrainConfigTest, ValidationNamesTheOption) {
  auto expectError = [](auto mutate, const std::string& message) {
    TrainConfig config;
    mutate(config);
    try {
      validate(config);
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expectError([](TrainConfig& c) { c.batchSize = 0; }, "--batch-size");
  expectError([](TrainConfig& c) { c.datasets = {"mnist", "mnist"}; }, "twice");
  expectError([](TrainConfig& c) { c.datasets = {"mnist", "cifar10", "synthetic"}; }, "one or two");
  expectError([](TrainConfig& c) { c.checkpointEvery = 5; }, "--checkpoint-every needs");
  expectError([](TrainConfig& c) { c.momentum = 1.0; }, "--momentum");
  EXPECT_NO_THROW(validate(TrainConfig{}));
  EXPECT_THROW(parseOptimizer("lbfgs"), ConfigError);
  EXPECT_EQ(parseBackend("nccl"), Backend::kNccl);
  EXPECT_THROW(parseDType("float16"), ConfigError);
}

TEST(TrainReportTest, JsonHasTheDocumentedFields) {
  TrainingReport report;
  report.worldSize = 4;
  report.backend = "gloo";
  EpochRecord epoch;
  epoch.steps = 10;
  epoch.loss = 0.25;
  epoch.samples = 640;
  epoch.seconds = 2;
  epoch.samplesPerSecond = 320;
  epoch.evalAccuracy = 0.5;
  epoch.eval.push_back({"mnist", 5000, 10000, 2});
  data::VisitSummary visits;
  visits.datasetSize = 1000;
  visits.seen = 640;
  visits.neverSeen = 360;
  epoch.datasets.push_back({"mnist", visits});
  report.epochs.push_back(epoch);
  report.trainSamples = 640;
  report.trainSeconds = 2;
  report.parameters.push_back({"head.weight", -1.5, 3.0});
  const auto json = nlohmann::json::parse(toJson(report));
  EXPECT_EQ(json["world_size"], 4);
  EXPECT_EQ(json["samples_per_s"], 320.0);
  EXPECT_EQ(json["epochs"][0]["eval"][0]["accuracy"], 0.5);
  EXPECT_EQ(json["epochs"][0]["datasets"][0]["never_seen"], 360);
  EXPECT_EQ(json["parameters"][0]["name"], "head.weight");
  EXPECT_EQ(json["parameters"][0]["norm"], 3.0);
  EXPECT_EQ(json["config"]["mix"], "zip");
  const std::string line = epochSummaryLine(report.epochs[0], 3);
  EXPECT_NE(line.find("epoch 1/3: loss 0.2500, eval accuracy 50.00% (mnist 5000/10000)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("mnist: 640 seen, 360 never seen"), std::string::npos) << line;
}

TEST(TrainReportTest, WriteIsAtomicAndAnUnwritablePathIsAnError) {
  EXPECT_THROW(writeReport(TrainingReport{}, "/nonexistent-dir/report.json"), Error);
}

}  // namespace
}  // namespace ddph::train
