// What the user had is never lost: a report written onto a disk that fills up mid-write, and
// ddp-train killed in the middle of writing its checkpoint. The disk is a file-size limit
// (with_file_limit: the write that crosses it fails, or kills its writer), so the fault lands
// inside the write itself, every time, with no timing involved.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace ddph::test_support {
namespace {

using namespace test_support;

const std::string kSim = DDPH_DDP_SIM;
const std::string kTrain = DDPH_DDP_TRAIN;
const std::string kWithFileLimit = DDPH_WITH_FILE_LIMIT;

std::vector<std::string> limited(std::uintmax_t bytes, const char* mode,
                                 std::vector<std::string> argv) {
  std::vector<std::string> all{kWithFileLimit, std::to_string(bytes), mode, "--"};
  all.insert(all.end(), argv.begin(), argv.end());
  return all;
}

// The files of `dir` other than `keep`.
std::vector<std::string> othersIn(const std::string& dir, const std::vector<std::string>& keep) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) found.push_back(name);
  }
  return found;
}

TEST(WriteFaults, AFullDiskUnderTheReportIsOneLineAndTheOldReportStays) {
  TempDir dir;
  const std::string report = dir.path() + "/report.json";
  const auto first = runCommand({kSim, "run", "healthy", "-n", "2", "--report", report, "-q"}, 300s);
  ASSERT_EQ(first.exitCode, 0) << first.err;
  const std::string before = readFile(report);
  ASSERT_GT(before.size(), 200u);
  // A limit below the report's size: the write fails part-way, as on a full disk.
  const auto full = runCommand(
      limited(before.size() / 2, "fail",
              {kSim, "run", "missing-set-epoch", "-n", "2", "--report", report, "-q"}),
      300s);
  // The first file past the limit is the run's own trace (every run is traced: its verdict on a
  // failed rank comes from it), so the one line names that file, not the report.
  EXPECT_EQ(full.exitCode, 3) << full.out << full.err;
  EXPECT_NE(full.err.find("File too large"), std::string::npos) << full.err;
  EXPECT_EQ(std::count(full.err.begin(), full.err.end(), '\n'), 1) << full.err;
  EXPECT_EQ(readFile(report), before) << "the report the user had was changed";
  EXPECT_EQ(othersIn(dir.path(), {"report.json"}), std::vector<std::string>{})
      << "a half-written temp file was left";
}

TEST(WriteFaults, DdpTrainKilledWhileWritingItsCheckpointKeepsTheOldOne) {
  TempDir dir;
  const std::string d = dir.path();
  const std::vector<std::string> args = {"--dataset", "synthetic", "--dataset-size", "768",
                                         "--epochs", "1", "--progress", "lines", "--threads", "1"};
  auto withArgs = [&](std::vector<std::string> more) {
    std::vector<std::string> argv{kTrain};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), more.begin(), more.end());
    return argv;
  };
  const auto first = runCommand(withArgs({"--steps", "3", "--checkpoint", d + "/ckpt"}), 300s);
  ASSERT_EQ(first.exitCode, 0) << first.err;
  const std::string before = readFile(d + "/ckpt");
  ASSERT_GT(before.size(), 1000u);
  // The next run dies inside the write that crosses half the checkpoint's size: its checkpoint.
  const auto killed = runCommand(
      limited(before.size() / 2, "kill",
              withArgs({"--resume", d + "/ckpt", "--steps", "6", "--checkpoint", d + "/ckpt"})),
      300s);
  ASSERT_EQ(killed.exitCode, 128 + SIGXFSZ) << killed.out << killed.err;
  EXPECT_EQ(readFile(d + "/ckpt"), before) << "the checkpoint the user had was changed";
  // What it was writing is the one temp file beside it, cut at the limit; nothing reads it.
  const auto left = othersIn(d, {"ckpt"});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind("ckpt.tmp.", 0), 0u) << left[0];
  EXPECT_EQ(fs::file_size(d + "/" + left[0]), before.size() / 2);
  // The old checkpoint still resumes, to the same end as a run that was never interrupted.
  const auto resumed = runCommand(
      withArgs({"--resume", d + "/ckpt", "--steps", "6", "--report-json", d + "/resumed.json"}),
      300s);
  EXPECT_EQ(resumed.exitCode, 0) << resumed.err;
  const auto straight = runCommand(withArgs({"--steps", "6", "--report-json", d + "/straight.json"}),
                                   300s);
  ASSERT_EQ(straight.exitCode, 0) << straight.err;
  const auto finalParameters = [](const std::string& path) {
    const auto report = nlohmann::json::parse(readFile(path));
    return report.at("parameters").dump();
  };
  EXPECT_EQ(finalParameters(d + "/resumed.json"), finalParameters(d + "/straight.json"));
}

}  // namespace
}  // namespace ddph::test_support
