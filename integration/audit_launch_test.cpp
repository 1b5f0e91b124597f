// `ddp-sim launch --audit` and `ddp-sim audit` end to end: real rank processes (ddp-train in C++,
// unmodified PyTorch scripts through the Python recorder), real Gloo, the trace read back and
// judged. Each bug program must give its property on the right ranks and epoch; the healthy ones
// no finding at all.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace ddph::test {
namespace {

const std::string kSim = DDPH_SIM_PATH;
const std::string kTrain = DDPH_TRAIN_PATH;
const std::string kMnistDir = DDPH_MNIST_DIR;
const std::string kPython = DDPH_PYTHON_PATH;
const std::string kPrograms = DDPH_AUDIT_PROGRAMS_DIR;

struct Audited {
  CommandResult command;
  Json report;
};

// Runs `program` on `world` ranks under launch --audit, its report as JSON. Generous deadlines:
// CI runs this beside other tests on 2 cores.
Audited launchAudited(int world, const std::vector<std::string>& program,
                      const std::vector<std::string>& launchArgs = {}) {
  TempDir dir("ddph-audit-launch");
  const std::string report = dir.path() + "/report.json";
  std::vector<std::string> argv = {kSim, "launch", "--audit", "--report", report, "-n",
                                   std::to_string(world), "--timeout", "240"};
  argv.insert(argv.end(), launchArgs.begin(), launchArgs.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  Audited a;
  a.command = runCommand(argv, 300s);
  if (fs::exists(report)) a.report = Json::parse(readFile(report));
  return a;
}

std::string shown(const Audited& a) {
  return "exit " + std::to_string(a.command.exitCode) + "\n" + a.command.out + a.command.err +
         (a.report.is_null() ? "" : a.report.dump(2));
}

// The violations of `property` in the report.
std::vector<Json> violationsOf(const Audited& a, const std::string& property) {
  std::vector<Json> out;
  if (!a.report.contains("violations")) return out;
  for (const auto& v : a.report["violations"]) {
    if (v["property"] == property) out.push_back(v);
  }
  return out;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::vector<std::string> trainArgs(const std::string& mix, int epochs) {
  return {kTrain, "--dataset", "mnist,synthetic", "--dataset-size", "600", "--mix", mix,
          "--epochs", std::to_string(epochs), "--no-eval", "--progress", "none", "--threads", "1",
          "--mnist-dir", kMnistDir};
}

TEST(AuditLaunch, DdpTrainWithCycleHasNoFinding) {
  const auto a = launchAudited(2, trainArgs("cycle", 1));  // a whole MNIST epoch
  ASSERT_EQ(a.command.exitCode, 0) << shown(a);
  EXPECT_TRUE(a.report["passed"].get<bool>()) << shown(a);
  EXPECT_EQ(a.report["ranks_traced"], 2);
  EXPECT_TRUE(has(a.command.out, "): PASSED")) << a.command.out;
}

TEST(AuditLaunch, DdpTrainWithZipLeavesMnistUnseen) {
  const auto a = launchAudited(2, trainArgs("zip", 2));
  ASSERT_EQ(a.command.exitCode, 1) << shown(a);
  const auto found = violationsOf(a, "coverage");
  ASSERT_EQ(found.size(), 1u) << shown(a);
  EXPECT_EQ(found[0]["epoch"], 0);
  const std::string detail = found[0]["detail"];
  // 600 synthetic samples on 2 ranks: 5 batches of 64 per rank, 640 MNIST samples consumed.
  EXPECT_TRUE(has(detail, "loader 0 (mnist, 60000 samples): only 640 of its 60000 samples")) << detail;
  EXPECT_TRUE(has(detail, "when loader 1 (synthetic, 600 samples) ran out")) << detail;
  EXPECT_TRUE(has(detail, "(the same in 2 epochs)")) << detail;
  EXPECT_TRUE(has(found[0]["likely_cause"].get<std::string>(), "zip()"));
}

TEST(AuditLaunch, ARankThatNeverTracedIsNamedWithHowItEnded) {
  // ddp-train refuses a missing MNIST folder before it records anything: no rank file at all.
  TempDir dir("ddph-audit-launch");
  const auto a = launchAudited(2, {kTrain, "--mnist-dir", dir.path() + "/none"});
  ASSERT_EQ(a.command.exitCode, 1) << shown(a);
  const auto found = violationsOf(a, "rank-failure");
  ASSERT_EQ(found.size(), 2u) << shown(a);
  EXPECT_TRUE(has(found[0]["detail"], "rank 0 left no trace; it exited with code 2")) << shown(a);
}

TEST(AuditLaunch, TraceDirHoldingATraceIsRefused) {
  TempDir dir("ddph-audit-launch");
  std::ofstream(dir.path() + "/rank-0.jsonl") << "{}\n";
  const auto r = runCommand({kSim, "launch", "--audit", "--trace-dir", dir.path(), "-n", "1", "--",
                             "/bin/true"},
                            60s);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(has(r.err, "already holds a trace (rank-0.jsonl)")) << r.err;
  EXPECT_EQ(readFile(dir.path() + "/rank-0.jsonl"), "{}\n");  // what the user had is untouched
}

TEST(AuditLaunch, AuditOptionsNeedAudit) {
  const auto r = runCommand({kSim, "launch", "--report", "x.json", "-n", "1", "--", "/bin/true"}, 60s);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(has(r.err, "--trace-dir and --report need --audit")) << r.err;
}

TEST(AuditCommand, UnreadableTraceIsExitTwoWithOneLine) {
  TempDir dir("ddph-audit-launch");
  std::ofstream(dir.path() + "/rank-0.jsonl")
      << R"({"ev":"header","trace":"ddph-audit","version":1,"rank":0,"world_size":1})" << "\n"
      << "garbage\n";
  const auto r = runCommand({kSim, "audit", dir.path()}, 60s);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(has(r.err, "rank-0.jsonl line 2: not JSON")) << r.err;
  EXPECT_EQ(countLines(r.err, ""), 1) << r.err;
  const auto missing = runCommand({kSim, "audit", dir.path() + "/nope"}, 60s);
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_TRUE(has(missing.err, "is not a folder")) << missing.err;
}

}  // namespace
}  // namespace ddph::test
