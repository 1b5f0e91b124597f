// ddp-train end to end: real rank processes under `ddp-sim launch`, real Gloo, real MNIST files.
//  - equivalence: W ranks with batch b reach the parameters of one process with batch W*b over
//    the same global order (and the comparison catches a different batching or seed);
//  - resume: a run stopped and resumed from its checkpoint visits exactly the samples of an
//    uninterrupted run, step by step, and ends with the same parameters (and a stale checkpoint
//    is caught repeating samples);
//  - the two-dataset training: zip's truncation is counted, cycle and concat see everything;
//  - evaluation counts every test sample once whatever W;
//  - bad input: one line, exit code 2, nothing half-written.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ddph/trace/trace.h"
#include "ddph/data/image_dataset.h"
#include "test_support.h"

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace ddph::test_support {

using common::ChildProcess;
using sampler::Index;

namespace {

const std::string kSim = DDPH_DDP_SIM;
const std::string kTrain = DDPH_DDP_TRAIN;
const std::string kMnistDir = DDPH_MNIST_DIR;

struct TrainRun {
  CommandResult command;
  Json report;
};

/// ddp-train alone (world <= 1) or under `ddp-sim launch -n world`, with --report-json.
TrainRun train(int world, std::vector<std::string> args, const std::string& reportPath) {
  std::vector<std::string> argv;
  if (world > 1) argv = {kSim, "launch", "-n", std::to_string(world), "--timeout", "240", "--"};
  argv.push_back(kTrain);
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--report-json", reportPath, "--progress", "lines", "--threads", "1"});
  TrainRun run;
  run.command = runCommand(argv, 300s);
  if (fs::exists(reportPath)) run.report = Json::parse(readFile(reportPath));
  return run;
}

#define ASSERT_TRAINED(run) \
  ASSERT_EQ((run).command.exitCode, 0) << (run).command.out << (run).command.err

/// The first parameter whose sum or norm differs by more than rtol * max(1, |a|, |b|), or "".
std::string parameterMismatch(const Json& a, const Json& b, double rtol) {
  if (a["parameters"].size() != b["parameters"].size()) return "different parameter lists";
  for (std::size_t i = 0; i < a["parameters"].size(); ++i) {
    const Json& pa = a["parameters"][i];
    const Json& pb = b["parameters"][i];
    if (pa["name"] != pb["name"]) return "different parameter names";
    for (const char* field : {"sum", "norm"}) {
      const double x = pa[field].get<double>(), y = pb[field].get<double>();
      if (std::abs(x - y) > rtol * std::max({1.0, std::abs(x), std::abs(y)})) {
        std::ostringstream out;
        out.precision(17);
        out << pa["name"].get<std::string>() << "." << field << ": " << x << " vs " << y;
        return out.str();
      }
    }
  }
  return "";
}

/// One line per batch, "epoch E loader L: i i i …", in the order rank `rank` drew them, from the
/// audit trace `--trace-samples DIR` wrote (empty when there is none).
std::vector<std::string> samples(const std::string& dir, int rank) {
  const std::string file = dir + "/rank-" + std::to_string(rank) + ".jsonl";
  if (!fs::exists(file)) return {};
  const trace::RankTrace trace = trace::readRankTrace(file);
  std::vector<std::pair<std::int64_t, std::string>> batches;
  for (const auto& pass : trace.passes) {
    for (const auto& b : pass.batches) {
      std::string line = "epoch " + std::to_string(pass.iter) + " loader " + std::to_string(pass.loader) + ":";
      for (Index i : b.indices.value_or(std::vector<Index>{})) line += " " + std::to_string(i);
      batches.push_back({b.line, line});
    }
  }
  std::sort(batches.begin(), batches.end());
  std::vector<std::string> out;
  for (auto& [at, line] : batches) out.push_back(std::move(line));
  return out;
}

/// Where `resumed` (the interrupted run's trace followed by the resumed run's) departs from the
/// uninterrupted `reference`, or "".
std::string traceMismatch(const std::vector<std::string>& reference,
                          const std::vector<std::string>& resumed) {
  for (std::size_t i = 0; i < std::min(reference.size(), resumed.size()); ++i) {
    if (reference[i] != resumed[i]) {
      return "line " + std::to_string(i) + ": expected '" + reference[i].substr(0, 60) +
             "', got '" + resumed[i].substr(0, 60) + "'";
    }
  }
  if (reference.size() != resumed.size()) {
    return "expected " + std::to_string(reference.size()) + " steps, got " +
           std::to_string(resumed.size());
  }
  return "";
}

template <typename T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kSynthetic = {"--dataset", "synthetic", "--dataset-size", "768",
                                             "--epochs", "2", "--lr", "0.05"};

// ---- Equivalence ----------------------------------------------------------------------------

TEST(TrainEquivalence, FourRanksMatchOneProcessWithFourTimesTheBatch_Float64) {
  TempDir dir;
  auto args = concat(kSynthetic, {"--dtype", "float64"});
  const auto ddp = train(4, concat(args, {"--batch-size", "8"}), dir.path() + "/ddp.json");
  ASSERT_TRAINED(ddp);
  const auto single = train(1, concat(args, {"--batch-size", "32"}), dir.path() + "/one.json");
  ASSERT_TRAINED(single);
  EXPECT_EQ(ddp.report["world_size"], 4);
  EXPECT_EQ(single.report["world_size"], 1);
  EXPECT_EQ(ddp.report["global_steps"], single.report["global_steps"]);
  EXPECT_EQ(parameterMismatch(ddp.report, single.report, 1e-9), "");

  // The comparison is able to fail: another batching, or another seed, is caught.
  const auto otherBatch = train(1, concat(args, {"--batch-size", "16"}), dir.path() + "/b16.json");
  ASSERT_TRAINED(otherBatch);
  EXPECT_NE(parameterMismatch(ddp.report, otherBatch.report, 1e-9), "");
  const auto otherSeed =
      train(1, concat(args, {"--batch-size", "32", "--seed", "1"}), dir.path() + "/s1.json");
  ASSERT_TRAINED(otherSeed);
  EXPECT_NE(parameterMismatch(ddp.report, otherSeed.report, 1e-9), "");
}

TEST(TrainEquivalence, RealMnistFloat32WithinDocumentedTolerance) {
  TempDir dir;
  const std::vector<std::string> args = {"--dataset", "mnist", "--mnist-dir", kMnistDir,
                                         "--steps", "60", "--no-eval", "--lr", "0.1"};
  const auto ddp = train(4, concat(args, {"--batch-size", "16"}), dir.path() + "/ddp.json");
  ASSERT_TRAINED(ddp);
  const auto single = train(1, concat(args, {"--batch-size", "64"}), dir.path() + "/one.json");
  ASSERT_TRAINED(single);
  EXPECT_EQ(ddp.report["global_steps"], 60);
  EXPECT_EQ(parameterMismatch(ddp.report, single.report, 1e-4), "");
  const auto otherBatch = train(1, concat(args, {"--batch-size", "32"}), dir.path() + "/b32.json");
  ASSERT_TRAINED(otherBatch);
  EXPECT_NE(parameterMismatch(ddp.report, otherBatch.report, 1e-4), "");
}

// ---- Resume ---------------------------------------------------------------------------------

TEST(TrainResume, StoppedAndResumedRunMatchesUninterruptedSampleBySample) {
  TempDir dir;
  const std::string d = dir.path();
  const auto args = concat(kSynthetic, {"--batch-size", "16", "--optimizer", "adam",
                                        "--lr", "0.01", "--dtype", "float64"});
  const auto full = train(2, concat(args, {"--trace-samples", d + "/full"}), d + "/full.json");
  ASSERT_TRAINED(full);
  // 768 samples, 2 ranks, 16 per step: 24 steps an epoch; stop in the middle of epoch 0 at 13
  // (checkpoints at 5 and 10 on the way, the final one at 13), resume to the end.
  const auto first = train(2, concat(args, {"--steps", "13", "--checkpoint", d + "/ckpt",
                                            "--checkpoint-every", "5", "--trace-samples",
                                            d + "/first"}),
                           d + "/first.json");
  ASSERT_TRAINED(first);
  EXPECT_EQ(first.report["global_steps"], 13);
  ASSERT_TRUE(fs::exists(d + "/ckpt"));
  const auto second = train(2, concat(args, {"--resume", d + "/ckpt", "--trace-samples",
                                             d + "/second"}),
                            d + "/second.json");
  ASSERT_TRAINED(second);
  EXPECT_EQ(second.report["global_steps"], full.report["global_steps"]);
  for (int rank : {0, 1}) {
    const auto reference = samples(d + "/full", rank);
    ASSERT_EQ(reference.size(), 48u) << rank;
    EXPECT_EQ(traceMismatch(reference, concat(samples(d + "/first", rank),
                                              samples(d + "/second", rank))),
              "")
        << rank;
  }
  EXPECT_EQ(parameterMismatch(full.report, second.report, 1e-12), "");
  // The resumed epoch still reports the whole epoch: its loss and what it visited.
  const Json& epoch0 = second.report["epochs"][0];
  EXPECT_EQ(epoch0["first_step"], 13);
  EXPECT_EQ(epoch0["steps"], 24);
  EXPECT_NEAR(epoch0["loss"].get<double>(), full.report["epochs"][0]["loss"].get<double>(), 1e-5);
  EXPECT_EQ(epoch0["datasets"][0]["never_seen"], 0);
  // No temp files next to the checkpoint.
  for (const auto& entry : fs::directory_iterator(d)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

// ---- Elastic resume (NOTE [Elastic resume], docs/elastic-resume.md) --------------------------

/// Every index every rank of a run drew, from its --trace-samples folder.
std::vector<Index> drawn(const std::string& dir, int world) {
  std::vector<Index> out;
  for (int rank = 0; rank < world; ++rank) {
    for (const auto& line : samples(dir, rank)) {
      std::istringstream in(line.substr(line.find(':') + 1));
      for (Index i; in >> i;) out.push_back(i);
    }
  }
  return out;
}

/// "" when `taken` holds every index of [0, n) at least once and `extra` more copies in all.
std::string exactlyOnce(const std::vector<Index>& taken, std::int64_t n, std::int64_t extra) {
  std::vector<int> count(static_cast<std::size_t>(n), 0);
  for (Index i : taken) {
    if (i < 0 || i >= n) return "index " + std::to_string(i) + " out of range";
    ++count[static_cast<std::size_t>(i)];
  }
  for (Index i = 0; i < n; ++i) {
    if (count[static_cast<std::size_t>(i)] == 0) return "index " + std::to_string(i) + " never taken";
  }
  const auto copies = static_cast<std::int64_t>(taken.size()) - n;
  return copies == extra ? "" : std::to_string(copies) + " extra copies, expected " + std::to_string(extra);
}

// One epoch of 768 samples, 8 a rank a step: 24 steps on 4 ranks. Stopped at step 13 (416 samples
// taken), the 352 left resume on 3 ranks (118 each: 2 of padding) or on 2 (176 each), and a
// second stop on 3 ranks resumes on 2: every sample of the epoch once, padding apart.
TEST(TrainResume, ElasticResumeOnOtherWorldSizesTakesEverySampleOnce) {
  TempDir dir;
  const std::string d = dir.path();
  const std::vector<std::string> args = {"--dataset", "synthetic", "--dataset-size", "768",
                                         "--epochs", "1", "--batch-size", "8", "--lr", "0.05"};
  const auto first = train(4, concat(args, {"--steps", "13", "--checkpoint", d + "/ckpt4",
                                            "--trace-samples", d + "/first"}),
                           d + "/first.json");
  ASSERT_TRAINED(first);
  EXPECT_EQ(drawn(d + "/first", 4).size(), 416u);

  const auto on3 = train(3, concat(args, {"--resume", d + "/ckpt4", "--trace-samples", d + "/on3"}),
                         d + "/on3.json");
  ASSERT_TRAINED(on3);
  EXPECT_NE(on3.command.out.find("resumed elastically from " + d + "/ckpt4 (4 ranks) at epoch 1 "
                                 "after synthetic 104 a rank"),
            std::string::npos)
      << on3.command.out;
  EXPECT_EQ(exactlyOnce(concat(drawn(d + "/first", 4), drawn(d + "/on3", 3)), 768, 2), "");
  EXPECT_EQ(on3.report["epochs"][0]["datasets"][0]["never_seen"], 0);

  const auto on2 = train(2, concat(args, {"--resume", d + "/ckpt4", "--trace-samples", d + "/on2"}),
                         d + "/on2.json");
  ASSERT_TRAINED(on2);
  EXPECT_EQ(exactlyOnce(concat(drawn(d + "/first", 4), drawn(d + "/on2", 2)), 768, 0), "");

  // 4 ranks, then 3 ranks until global step 18 (5 steps: 120 more), then 2 ranks: 232 left.
  const auto stop3 = train(3, concat(args, {"--resume", d + "/ckpt4", "--steps", "18", "--checkpoint",
                                            d + "/ckpt3", "--trace-samples", d + "/stop3"}),
                           d + "/stop3.json");
  ASSERT_TRAINED(stop3);
  EXPECT_EQ(drawn(d + "/stop3", 3).size(), 120u);
  const auto then2 = train(2, concat(args, {"--resume", d + "/ckpt3", "--trace-samples", d + "/then2"}),
                           d + "/then2.json");
  ASSERT_TRAINED(then2);
  auto all = concat(drawn(d + "/first", 4), drawn(d + "/stop3", 3));
  all = concat(all, drawn(d + "/then2", 2));
  EXPECT_EQ(exactlyOnce(all, 768, 0), "");
}

// Stopped twice in one epoch and resumed each time on the same 4 ranks: the uninterrupted run,
// sample by sample and parameter by parameter, to the last bit.
TEST(TrainResume, TwoStopsOnTheSameWorldSizeAreTheUninterruptedRun) {
  TempDir dir;
  const std::string d = dir.path();
  const std::vector<std::string> args = {"--dataset", "synthetic", "--dataset-size", "768",
                                         "--epochs", "1", "--batch-size", "8", "--lr", "0.05",
                                         "--dtype", "float64"};
  const auto full = train(4, concat(args, {"--trace-samples", d + "/full"}), d + "/full.json");
  ASSERT_TRAINED(full);
  ASSERT_TRAINED(train(4, concat(args, {"--steps", "13", "--checkpoint", d + "/a", "--trace-samples",
                                        d + "/first"}),
                       d + "/first.json"));
  ASSERT_TRAINED(train(4, concat(args, {"--resume", d + "/a", "--steps", "19", "--checkpoint",
                                        d + "/b", "--trace-samples", d + "/second"}),
                       d + "/second.json"));
  const auto third = train(4, concat(args, {"--resume", d + "/b", "--trace-samples", d + "/third"}),
                           d + "/third.json");
  ASSERT_TRAINED(third);
  for (int rank = 0; rank < 4; ++rank) {
    auto resumed = concat(samples(d + "/first", rank), samples(d + "/second", rank));
    EXPECT_EQ(traceMismatch(samples(d + "/full", rank), concat(resumed, samples(d + "/third", rank))),
              "")
        << rank;
  }
  EXPECT_EQ(parameterMismatch(full.report, third.report, 0.0), "");
}

TEST(TrainResume, SigtermStopsEveryRankAtOneStepWithACheckpoint) {
  // SIGTERM to the launcher (as Ctrl-C or a scheduler's preemption would): it forwards it to the
  // ranks, they agree on a step, rank 0 checkpoints, all exit 128 + 15; the resumed run then
  // visits exactly what the uninterrupted one did.
  TempDir dir;
  const std::string d = dir.path();
  const std::vector<std::string> args = {kTrain, "--dataset", "mnist", "--mnist-dir", kMnistDir,
                                         "--steps", "150", "--no-eval", "--threads", "1",
                                         "--progress", "none"};
  auto launch = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {kSim, "launch", "-n", "2", "--timeout", "240", "--grace", "20",
                                     "--"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  const auto full = runCommand(launch({"--trace-samples", d + "/full"}), 300s);
  ASSERT_EQ(full.exitCode, 0) << full.err;

  const std::string marker = uniqueMarker();
  ChildProcess launcher(launch({"--checkpoint", d + "/ckpt", "--checkpoint-every", "10",
                                "--trace-samples", d + "/first"}),
                        childOptions({{kMarkerVariable, marker}}, d + "/out", d + "/err"));
  ASSERT_TRUE(eventually([&] { return fs::exists(d + "/ckpt"); }, 120s)) << readFile(d + "/err");
  launcher.signal(SIGTERM);
  const int rc = exitCodeBy(launcher, std::chrono::steady_clock::now() + 120s);
  EXPECT_EQ(rc, 128 + SIGTERM) << readFile(d + "/err");
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 10s).empty());
  const std::string err = readFile(d + "/err");
  EXPECT_NE(err.find("stopped by signal 15 before step"), std::string::npos) << err;
  const auto first0 = samples(d + "/first", 0), first1 = samples(d + "/first", 1);
  ASSERT_FALSE(first0.empty()) << err;
  ASSERT_LT(first0.size(), 150u) << "the run ended before the signal: nothing was interrupted";
  EXPECT_EQ(first0.size(), first1.size()) << "the ranks stopped at different steps";

  const auto resumed = runCommand(launch({"--resume", d + "/ckpt", "--trace-samples", d + "/second"}), 300s);
  ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
  for (int rank : {0, 1}) {
    EXPECT_EQ(traceMismatch(samples(d + "/full", rank),
                            concat(samples(d + "/first", rank), samples(d + "/second", rank))),
              "")
        << rank;
  }
}

TEST(TrainResume, StaleCheckpointIsCaughtRepeatingSamples) {
  // Negative control for the comparison above: resuming from an older checkpoint than the run's
  // last one repeats samples, and traceMismatch says where.
  TempDir dir;
  const std::string d = dir.path();
  const auto args = concat(kSynthetic, {"--epochs", "1", "--batch-size", "16"});
  const auto full = train(2, concat(args, {"--trace-samples", d + "/full"}), d + "/full.json");
  ASSERT_TRAINED(full);
  const auto first = train(2, concat(args, {"--steps", "5", "--checkpoint", d + "/old"}),
                           d + "/a.json");
  ASSERT_TRAINED(first);
  const auto more = train(2, concat(args, {"--steps", "9", "--resume", d + "/old", "--checkpoint",
                                           d + "/new", "--trace-samples", d + "/first"}),
                          d + "/b.json");
  ASSERT_TRAINED(more);
  // Steps 5..8 are in `first`; resuming from `old` (step 5) instead of `new` (step 9) repeats them.
  const auto resumed = train(2, concat(args, {"--resume", d + "/old", "--trace-samples",
                                              d + "/second"}),
                             d + "/c.json");
  ASSERT_TRAINED(resumed);
  auto reference = samples(d + "/full", 0);
  reference.erase(reference.begin(), reference.begin() + 5);
  const std::string mismatch =
      traceMismatch(reference, concat(samples(d + "/first", 0), samples(d + "/second", 0)));
  EXPECT_NE(mismatch, "");
  EXPECT_NE(mismatch.find("line 4:"), std::string::npos) << mismatch;
}

TEST(TrainResume, CheckpointOfAnotherRunIsRefused) {
  TempDir dir;
  const std::string d = dir.path();
  const auto args = concat(kSynthetic, {"--epochs", "1", "--steps", "3"});
  ASSERT_TRAINED(train(1, concat(args, {"--checkpoint", d + "/ckpt"}), d + "/a.json"));
  const auto other = train(1, concat(args, {"--batch-size", "32", "--resume", d + "/ckpt"}),
                           d + "/b.json");
  EXPECT_EQ(other.command.exitCode, 2) << other.command.err;
  EXPECT_NE(other.command.err.find("batch_size was 64, this run has 32"), std::string::npos)
      << other.command.err;
  EXPECT_FALSE(fs::exists(d + "/b.json"));
  {
    std::ofstream(d + "/garbage") << "not a checkpoint";
  }
  const auto garbage = train(1, concat(args, {"--resume", d + "/garbage"}), d + "/c.json");
  EXPECT_EQ(garbage.command.exitCode, 2) << garbage.command.err;
  EXPECT_NE(garbage.command.err.find(d + "/garbage: not a readable ddp-train checkpoint"),
            std::string::npos)
      << garbage.command.err;
}

// ---- Two datasets -----------------------------------------------------------------------------

/// A small CIFAR-10 folder: `train` training records, `test` test records.
void writeCifar(const std::string& dir, std::int64_t train, std::int64_t test) {
  fs::create_directories(dir);
  auto make = [](std::int64_t n, std::uint8_t salt) {
    data::ImageDataset ds;
    ds.name = "cifar10";
    ds.shape = {3, 32, 32};
    ds.pixels.resize(static_cast<std::size_t>(n * ds.shape.features()));
    for (std::size_t i = 0; i < ds.pixels.size(); ++i) {
      ds.pixels[i] = static_cast<std::uint8_t>((i * 31 + salt) % 251);
    }
    for (std::int64_t i = 0; i < n; ++i) ds.labels.push_back(static_cast<std::uint8_t>(i % 10));
    return ds;
  };
  data::writeCifar10Batch(dir + "/data_batch_1.bin", make(train, 1));
  data::writeCifar10Batch(dir + "/test_batch.bin", make(test, 2));
}

TEST(TrainTwoDatasets, ZipTruncatesTheLongerDatasetAndSaysSo) {
  TempDir dir;
  const std::string d = dir.path();
  writeCifar(d + "/cifar", 200, 50);
  const std::vector<std::string> base = {"--dataset", "synthetic,cifar10", "--cifar10-dir",
                                         d + "/cifar", "--dataset-size", "1000",
                                         "--batch-size", "20"};
  const auto zip = train(2, concat(base, {"--mix", "zip"}), d + "/zip.json");
  ASSERT_TRAINED(zip);
  // Per rank: synthetic 500 samples = 25 batches, cifar 100 = 5 batches; zip takes 5 steps.
  const Json& epoch = zip.report["epochs"][0];
  EXPECT_EQ(epoch["steps"], 5);
  EXPECT_EQ(epoch["datasets"][0]["name"], "synthetic");
  EXPECT_EQ(epoch["datasets"][0]["seen"], 200);
  EXPECT_EQ(epoch["datasets"][0]["never_seen"], 800);
  EXPECT_EQ(epoch["datasets"][1]["never_seen"], 0);
  EXPECT_NE(zip.command.out.find("synthetic: 200 seen, 800 never seen"), std::string::npos)
      << zip.command.out;
  ASSERT_EQ(epoch["eval"].size(), 2u);
  EXPECT_EQ(epoch["eval"][1]["total"], 50);

  const auto cycle = train(2, concat(base, {"--mix", "cycle"}), d + "/cycle.json");
  ASSERT_TRAINED(cycle);
  EXPECT_EQ(cycle.report["epochs"][0]["steps"], 25);
  EXPECT_EQ(cycle.report["epochs"][0]["datasets"][0]["never_seen"], 0);
  EXPECT_EQ(cycle.report["epochs"][0]["datasets"][1]["never_seen"], 0);
  EXPECT_EQ(cycle.report["epochs"][0]["datasets"][1]["seen_more_than_once"], 200);

  const auto chained = train(2, concat(base, {"--mix", "concat"}), d + "/concat.json");
  ASSERT_TRAINED(chained);
  EXPECT_EQ(chained.report["epochs"][0]["steps"], 30);
  EXPECT_EQ(chained.report["epochs"][0]["datasets"][0]["never_seen"], 0);
  EXPECT_EQ(chained.report["epochs"][0]["datasets"][1]["seen_more_than_once"], 0);
}

// ---- Evaluation, output, errors ----------------------------------------------------------------

TEST(TrainEval, EveryTestSampleCountedOnceWhateverTheWorldSize) {
  TempDir dir;
  // 1001 training samples -> 200 test samples; on 3 ranks a padded sampler would count 201.
  const std::vector<std::string> args = {"--dataset", "synthetic", "--dataset-size", "1001",
                                         "--epochs", "1", "--batch-size", "32",
                                         "--lr", "0.05"};
  const auto three = train(3, args, dir.path() + "/w3.json");
  ASSERT_TRAINED(three);
  const Json& eval = three.report["epochs"][0]["eval"][0];
  EXPECT_EQ(eval["total"], 200);
  EXPECT_EQ(eval["padding_avoided"], 1);
  // Rank 0's progress is plain lines when not on a terminal; the epoch summary is on stdout.
  EXPECT_NE(three.command.err.find("epoch 1/1 step "), std::string::npos) << three.command.err;
  EXPECT_EQ(three.command.err.find('\r'), std::string::npos);
  EXPECT_NE(three.command.out.find("epoch 1/1: loss "), std::string::npos) << three.command.out;
  // Accuracy is computed, not made up: above chance on the learnable synthetic teacher.
  EXPECT_GT(three.report["epochs"][0]["eval_accuracy"].get<double>(), 0.2);
}

TEST(TrainErrors, BadInputIsOneLineAndExitCodeTwo) {
  TempDir dir;
  const std::string d = dir.path();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--dataset", "mnist", "--mnist-dir", d + "/nowhere"}, d + "/nowhere: missing"},
      {{"--dataset", "imagenet"}, "--dataset 'imagenet' is not one of"},
      {{"--mix", "interleave"}, "unknown dataset mix 'interleave'"},
      {{"--dataset", "synthetic", "--batch-size", "0"}, "--batch-size must be positive"},
      {{"--dataset", "synthetic", "--backend", "nccl"}, "--backend nccl needs"},
      {{"--dataset", "synthetic", "--resume", d + "/missing.ckpt"}, "no such checkpoint"},
      {{"--dataset", "synthetic", "--checkpoint", d + "/no/such/folder/ckpt"},
       "--checkpoint " + d + "/no/such/folder/ckpt: folder " + d + "/no/such/folder does not exist"},
  };
  for (const auto& c : cases) {
    const auto run = train(1, c.args, d + "/report.json");
    EXPECT_EQ(run.command.exitCode, 2) << c.message << "\n" << run.command.err;
    EXPECT_NE(run.command.err.find(c.message), std::string::npos) << run.command.err;
    EXPECT_EQ(std::count(run.command.err.begin(), run.command.err.end(), '\n'), 1)
        << run.command.err;
    EXPECT_FALSE(fs::exists(d + "/report.json"));
  }
}

// Run from another folder, the default data/mnist is not there: the one line names the folder it
// looked in and --mnist-dir, and the checkout's own files when this build has them.
TEST(TrainErrors, MissingDataFromAnotherFolderNamesTheOptionThatChoosesIt) {
  TempDir dir;
  const auto run = runCommand({"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" --dataset mnist --steps 1",
                               dir.path(), kTrain},
                              std::chrono::seconds(120));
  EXPECT_EQ(run.exitCode, 2) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find("ddp-train: error: data/mnist: missing: no such folder (in " +
                         fs::canonical(dir.path()).string() + "): give the folder that holds mnist's "
                         "files with --mnist-dir DIR"),
            std::string::npos)
      << run.err;
  const auto checkout = run.err.find("this build's checkout has them: --mnist-dir ");
  if (checkout != std::string::npos) {
    EXPECT_NE(run.err.find("--mnist-dir " + fs::canonical(kMnistDir).string() + ")"), std::string::npos)
        << run.err;
  } else {
    EXPECT_NE(run.err.find("or fetch them with scripts/fetch-mnist.sh"), std::string::npos) << run.err;
  }
}

TEST(TrainErrors, ARankThatFailsStopsTheWorldWithExitOne) {
  // Rank 1 is given a dataset folder that does not exist: it fails alone (exit 2) and the launcher
  // stops the others (they would otherwise wait for it at the rendezvous); no report is written.
  TempDir dir;
  const std::string d = dir.path();
  const std::string script = d + "/rank.sh";
  {
    std::ofstream(script) << "#!/bin/sh\n"
                             "if [ \"$RANK\" = 1 ]; then dir=" + d + "/nowhere; else dir=" + kMnistDir + "; fi\n"
                             "exec " + kTrain + " --dataset mnist --mnist-dir $dir --steps 5 "
                             "--timeout 60 --report-json " + d + "/r.json \"$@\"\n";
  }
  fs::permissions(script, fs::perms::owner_all);
  const auto run = runCommand({kSim, "launch", "-n", "2", "--timeout", "120", "--", script}, 180s);
  EXPECT_EQ(run.exitCode, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("rank 1"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(d + "/r.json"));
}

}  // namespace
}  // namespace ddph::test_support
