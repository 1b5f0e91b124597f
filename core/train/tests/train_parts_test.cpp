// The torch-free pieces of ddp-train: option validation, the progress display, the JSON report.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "ddph/common/error.h"
#include "ddph/train/progress.h"
#include "ddph/train/train_config.h"
#include "ddph/train/training_page.h"
#include "ddph/train/training_report.h"

namespace ddph::train {

using common::ConfigError;
using common::Error;

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
  // The same one-line error as ddp-sim's --html options.
  expectError([](TrainConfig& c) { c.reportHtmlPath = "/nonexistent-dir/run.html"; },
              "cannot write the HTML report to '/nonexistent-dir/run.html': no folder '/nonexistent-dir'");
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

// Two datasets zipped: the longer one loses samples in every whole epoch (a coverage violation);
// an epoch cut short by --steps is a note, not judged; padding copies are a note.
TrainingReport zippedReport() {
  TrainingReport report;
  report.worldSize = 2;
  report.backend = "gloo";
  report.config.datasets = {"synthetic", "cifar10"};
  report.config.mix = data::Mix::kZip;
  for (std::int64_t e = 0; e < 2; ++e) {
    EpochRecord epoch;
    epoch.epoch = e;
    epoch.steps = e == 0 ? 5 : 2;  // epoch 1 stopped by --steps
    epoch.plannedSteps = 5;
    for (std::int64_t s = 0; s < epoch.steps; ++s) {
      epoch.stepLog.push_back({e * 5 + s + 1, 2.0 - 0.1 * static_cast<double>(e * 5 + s), 80, 0.5});
    }
    epoch.datasets.push_back({"synthetic", {1000, epoch.steps * 40, epoch.steps * 40,
                                            1000 - epoch.steps * 40, 0}});
    epoch.datasets.push_back({"cifar10", {201, epoch.steps * 40, 201, 0, e == 0 ? 1 : 0}});
    report.epochs.push_back(epoch);
  }
  report.globalSteps = 7;
  return report;
}

TEST(TrainPage, NeverSeenInAWholeEpochIsACoverageViolation) {
  const report::Page page = trainingPage(zippedReport());
  EXPECT_FALSE(page.verdict.passed);
  ASSERT_EQ(page.verdict.properties.size(), 1u);
  EXPECT_EQ(page.verdict.properties[0].name, "coverage");
  ASSERT_EQ(page.verdict.violations.size(), 1u);  // epoch 1 was cut short: not judged
  const auto& v = page.verdict.violations[0];
  EXPECT_EQ(v.property, "coverage");
  EXPECT_EQ(v.epoch, 0);
  EXPECT_EQ(v.detail, "synthetic: 800 of 1000 samples never seen in epoch 0");
  EXPECT_NE(v.likelyCause.find("--mix zip ends every epoch with the shortest dataset"), std::string::npos);
  ASSERT_EQ(page.verdict.notes.size(), 2u);
  EXPECT_NE(page.verdict.notes[0].find("cifar10: 1 samples seen twice or more in epoch 0 (DistributedSampler pads"),
            std::string::npos) << page.verdict.notes[0];
  EXPECT_NE(page.verdict.notes[1].find("epoch 1 stopped after 2 of its 5 steps (--steps)"), std::string::npos)
      << page.verdict.notes[1];
  EXPECT_EQ(page.subtitle, "synthetic, cifar10 mixed by zip on 2 ranks (gloo), 2 epochs run, 7 steps: FAILED");
}

TEST(TrainPage, StepsAndDatasetsCarryTheRunsNumbers) {
  const report::Page page = trainingPage(zippedReport());
  ASSERT_TRUE(page.training);
  ASSERT_EQ(page.training->steps.size(), 7u);
  EXPECT_EQ(page.training->steps[5].epoch, 1);
  EXPECT_EQ(page.training->steps[5].step, 6);
  EXPECT_DOUBLE_EQ(page.training->steps[5].loss, 1.5);
  EXPECT_DOUBLE_EQ(page.training->steps[5].samplesPerSecond, 160.0);  // 80 samples in 0.5 s
  ASSERT_EQ(page.training->datasets.size(), 4u);
  EXPECT_EQ(page.training->datasets[2].dataset, "synthetic");
  EXPECT_EQ(page.training->datasets[2].epoch, 1);
  EXPECT_EQ(page.training->datasets[2].seen, 80);
  EXPECT_EQ(page.training->datasets[2].neverSeen, 920);
  EXPECT_EQ(page.training->datasets[1].seenTwice, 1);
}

TEST(TrainPage, WholeDatasetsPassAndCycleExplainsItsRereads) {
  TrainingReport report = zippedReport();
  report.config.mix = data::Mix::kCycle;
  report.epochs.resize(1);
  report.epochs[0].datasets[0].visits = {1000, 1000, 1000, 0, 0};
  report.epochs[0].datasets[1].visits = {201, 1000, 201, 0, 201};
  const report::Page page = trainingPage(report);
  EXPECT_TRUE(page.verdict.passed);
  EXPECT_TRUE(page.verdict.violations.empty());
  ASSERT_EQ(page.verdict.notes.size(), 1u);
  EXPECT_EQ(page.verdict.notes[0], "cifar10: 201 samples seen twice or more in epoch 0 (--mix cycle re-reads the shorter dataset)");
}

TEST(TrainPage, AnUnwritablePathIsAnError) {
  EXPECT_THROW(writeTrainingPage(zippedReport(), "/nonexistent-dir/run.html"), Error);
}

}  // namespace
}  // namespace ddph::train
