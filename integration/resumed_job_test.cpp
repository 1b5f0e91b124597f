// A run of several jobs (docs/audit.md, "A run of several jobs"): resumed_job.py stopped after 5
// steps of epoch 1 and resumed from its checkpoint, each job under `ddp-sim launch --audit`, the
// second with --resumes (and the two folders again under `ddp-sim audit T1 T2`). The interrupted
// epoch is judged across the jobs: healthy resumes pass (skipping batches by iterating, or by a
// sampler that starts at the step), the resume path's bugs are coverage with the samples trained
// twice or never and the cause chosen from the evidence.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audited_launch.h"
#include "test_support.h"

using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace ddph::test_support {
namespace {

const std::string kSim = DDPH_DDP_SIM;
const std::string kPython = DDPH_PYTHON;
const std::string kProgram = std::string(DDPH_AUDIT_PROGRAMS_DIR) + "/resumed_job.py";

struct TwoJobs {
  CommandResult first, second, together;
  Json report, togetherReport;
};

std::string text(const Json& v, const char* key) {
  return v.contains(key) && v[key].is_string() ? v[key].get<std::string>() : "";
}

// The first job stops after 5 steps of epoch 1; the second resumes it with `resumeArgs`.
TwoJobs runTwoJobs(const std::vector<std::string>& firstArgs,
                   const std::vector<std::string>& resumeArgs) {
  TempDir dir("ddph-resumed-job");
  const std::string t1 = dir.path() + "/t1", t2 = dir.path() + "/t2";
  const std::string checkpoint = dir.path() + "/ck.pt";
  auto launch = [&](const std::string& traces, std::vector<std::string> flags,
                    const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kSim, "launch", "--audit", "--trace-dir", traces, "-n", "4",
                                     "--timeout", "240"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", kPython, kProgram, "--checkpoint", checkpoint});
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand(argv, 300s, "", {{"TMPDIR", dir.path()}});
  };
  TwoJobs j;
  std::vector<std::string> first = {"--stop-after", "5"};
  first.insert(first.end(), firstArgs.begin(), firstArgs.end());
  j.first = launch(t1, {}, first);
  std::vector<std::string> resume = {"--resume"};
  resume.insert(resume.end(), resumeArgs.begin(), resumeArgs.end());
  j.second = launch(t2, {"--resumes", t1, "--report", dir.path() + "/r.json"}, resume);
  if (std::filesystem::exists(dir.path() + "/r.json")) {
    j.report = Json::parse(readFile(dir.path() + "/r.json"));
  }
  j.together = runCommand({kSim, "audit", t1, t2, "--report", dir.path() + "/t.json"}, 120s);
  if (std::filesystem::exists(dir.path() + "/t.json")) {
    j.togetherReport = Json::parse(readFile(dir.path() + "/t.json"));
  }
  return j;
}

std::string shown(const TwoJobs& j) {
  return "first job: exit " + std::to_string(j.first.exitCode) + "\n" + j.first.out + j.first.err +
         "second job: exit " + std::to_string(j.second.exitCode) + "\n" + j.second.out +
         j.second.err + "ddp-sim audit T1 T2: exit " + std::to_string(j.together.exitCode) + "\n" +
         j.together.out + j.together.err;
}

// The one violation of the run's report, a coverage finding about epoch 1 across the two jobs.
Json acrossTheJobs(const TwoJobs& j) {
  EXPECT_EQ(j.report["violations"].size(), 1u) << shown(j);
  if (j.report["violations"].size() != 1) return Json::object();
  const Json v = j.report["violations"][0];
  EXPECT_EQ(v["property"], "coverage") << shown(j);
  EXPECT_EQ(v["epoch"], 1) << shown(j);
  EXPECT_TRUE(has(text(v, "detail"), "epoch 1 ended inside job 1 (")) << shown(j);
  EXPECT_TRUE(has(text(v, "detail"), "(after 5 steps of it); across the two jobs")) << shown(j);
  return v;
}

TEST(ResumedJob, SkippingTheCheckpointsBatchesFinishesTheEpochOnce) {
  for (const std::vector<std::string> skip : {std::vector<std::string>{"--skip", "iterate"},
                                              std::vector<std::string>{"--skip", "sampler"}}) {
    const auto j = runTwoJobs(skip, skip);
    ASSERT_EQ(j.first.exitCode, 0) << skip[1] << "\n" << shown(j);
    EXPECT_EQ(j.second.exitCode, 0) << skip[1] << "\n" << shown(j);
    EXPECT_EQ(j.together.exitCode, 0) << skip[1] << "\n" << shown(j);
    EXPECT_EQ(j.report["jobs"].size(), 2u) << shown(j);
    EXPECT_TRUE(has(j.second.out, "a run of 2 jobs, each resumed from the one before")) << shown(j);
    EXPECT_TRUE(has(j.second.out, ": its checkpoint held 5 of its steps and job 2 (")) << shown(j);
    EXPECT_TRUE(has(j.second.out, "every one of its 600 samples once across the two jobs"))
        << shown(j);
    EXPECT_EQ(j.report["violations"], j.togetherReport["violations"]) << shown(j);
  }
}

TEST(ResumedJob, AResumePathWithoutSetEpochReplaysEpochZerosOrder) {
  const auto j = runTwoJobs({}, {"--no-set-epoch"});
  ASSERT_EQ(j.first.exitCode, 0) << shown(j);
  EXPECT_EQ(j.second.exitCode, 1) << shown(j);
  EXPECT_EQ(j.together.exitCode, 1) << shown(j);
  const Json v = acrossTheJobs(j);
  EXPECT_TRUE(has(text(v, "detail"), "of its 600 samples were trained twice (")) << shown(j);
  EXPECT_TRUE(has(text(v, "likely_cause"), "drew the rest of epoch 1 from epoch 0's order: its "
                                           "sampler's set_epoch was not called before that pass"))
      << shown(j);
  EXPECT_EQ(j.report["violations"], j.togetherReport["violations"]) << shown(j);
}

TEST(ResumedJob, RestartingTheInterruptedEpochTrainsTheCheckpointsStepsTwice) {
  const auto j = runTwoJobs({}, {"--restart-epoch"});
  ASSERT_EQ(j.first.exitCode, 0) << shown(j);
  EXPECT_EQ(j.second.exitCode, 1) << shown(j);
  const Json v = acrossTheJobs(j);
  // 5 steps of 15 samples on 4 ranks.
  EXPECT_TRUE(has(text(v, "detail"), "300 of its 600 samples were trained twice (")) << shown(j);
  EXPECT_TRUE(has(text(v, "detail"), "and 0 never")) << shown(j);
  EXPECT_TRUE(has(text(v, "likely_cause"), "trained epoch 1 again from its start, but its "
                                           "parameters when it began were job 1's last state"))
      << shown(j);
}

TEST(ResumedJob, AloneTheResumedJobsPartialEpochIsANoteNamingResumes) {
  // The second job alone: its first pass (a sampler that starts at the checkpoint's step) draws
  // half of epoch 1. Without the first job nothing says who trained the rest: a note, not coverage.
  TempDir dir("ddph-resumed-job");
  const std::string checkpoint = dir.path() + "/ck.pt";
  const auto first = launchAudited(4, {kPython, kProgram, "--checkpoint", checkpoint,
                                       "--stop-after", "5", "--skip", "sampler"});
  ASSERT_EQ(first.command.exitCode, 0) << shown(first);
  const auto second = launchAudited(4, {kPython, kProgram, "--checkpoint", checkpoint, "--resume",
                                        "--skip", "sampler"});
  EXPECT_EQ(second.command.exitCode, 0) << shown(second);
  EXPECT_TRUE(has(second.report["notes"].dump(), "the job began at epoch 1 and its first pass "
                                                 "drew part of it (rank 0: 75 samples)"))
      << shown(second);
  EXPECT_TRUE(has(second.report["notes"].dump(), "--resumes")) << shown(second);
}

TEST(ResumedJob, ResumesOfAFolderThatHoldsNoTraceIsOneLineBeforeAnyRank) {
  TempDir dir("ddph-resumed-job");
  const auto r = runCommand({kSim, "launch", "--audit", "--resumes", dir.path() + "/nothing", "-n",
                             "2", "--", kPython, kProgram, "--checkpoint", dir.path() + "/ck"},
                            120s);
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(has(r.err, "is not a folder")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace ddph::test_support
