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
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/stat.h>

#include "audited_launch.h"
#include "ddph/common/environment.h"
#include "test_support.h"

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace ddph::test_support {

using common::ChildProcess;

namespace {

const std::string kSim = DDPH_DDP_SIM;
const std::string kTrain = DDPH_DDP_TRAIN;
const std::string kMnistDir = DDPH_MNIST_DIR;
const std::string kPython = DDPH_PYTHON;
const std::string kPrograms = DDPH_AUDIT_PROGRAMS_DIR;

std::vector<std::string> trainArgs(const std::string& mix, int epochs) {
  return {kTrain, "--dataset", "mnist,synthetic", "--dataset-size", "600", "--mix", mix,
          "--epochs", std::to_string(epochs), "--no-eval", "--progress", "none", "--threads", "1",
          "--mnist-dir", kMnistDir};
}

// README.md's front door: the example a newcomer runs first names its bug (the README pastes this
// output).
TEST(AuditLaunch, TheReadmeExampleNamesItsBug) {
  if (kPython.empty()) GTEST_SKIP() << "no Python that imports torch";
  const auto a = launchAudited(4, {kPython, std::string(DDPH_EXAMPLES_DIR) + "/python/forgot_set_epoch.py"});
  ASSERT_EQ(a.command.exitCode, 1) << shown(a);
  EXPECT_NE(a.command.out.find("  FAIL reshuffle at epoch 0: loader 0 (TensorDataset, 600 samples): "
                               "epochs 0 and 1 give the same order of 600 samples (seed 0)"),
            std::string::npos)
      << shown(a);
  EXPECT_NE(a.command.out.find("likely cause: set_epoch(epoch) is not called before each epoch"),
            std::string::npos)
      << shown(a);
  EXPECT_EQ(a.report["violations"].size(), 1u) << shown(a);
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
  EXPECT_EQ(found[0]["notes"], Json::array({"the same in 2 epochs"})) << found[0].dump();
  EXPECT_TRUE(has(found[0]["likely_cause"].get<std::string>(), "zip()"));
}

TEST(AuditLaunch, DdpTrainAfterATorchrunRestartWritesItsAttemptFolder) {
  // The C++ recorder reads torchrun's restart count as the Python one does: a restarted rank
  // writes attempt-<K>/ (one ddp-train process with torchrun's count stands in for a restarted
  // rank; ddp-sim launch itself always says attempt 0).
  TempDir dir("ddph-audit-launch");
  const std::string traces = dir.path() + "/trace";
  fs::create_directory(traces);
  const auto run = runCommand(trainArgs("cycle", 1), 300s, "",
                              {{common::env::kAuditDir, traces}, {"TORCHELASTIC_RESTART_COUNT", "1"}});
  ASSERT_EQ(run.exitCode, 0) << run.out << run.err;
  const std::string second = traces + "/attempt-1";
  const std::string text = readFile(second + "/rank-0.jsonl");
  EXPECT_TRUE(has(text.substr(0, text.find('\n')), "\"attempt\":1")) << text.substr(0, 400);
  const auto audit = runCommand({kSim, "audit", second}, 120s);
  EXPECT_EQ(audit.exitCode, 0) << audit.out << audit.err;
  EXPECT_TRUE(has(audit.out, "this report judges attempt 1 of the run")) << audit.out;
  // The first attempt's folder holds no rank file of its own: the error names the attempt's.
  const auto first = runCommand({kSim, "audit", traces}, 120s);
  EXPECT_EQ(first.exitCode, 2) << first.out << first.err;
  EXPECT_TRUE(has(first.err, "only later attempts: audit one with ddp-sim audit " + second))
      << first.err;
}

// What the harness writes for a user (trace folder and traces, launch record, JSON and HTML
// reports) is created with the user's umask, as a shell's `>` would: a file 0666 & ~umask, a folder
// 0777 & ~umask, so nothing is world-writable unless the user's umask says so. Checked with a
// PyTorch script under launch --audit (the Python recorder writes the traces) and `ddp-sim run`.
TEST(AuditLaunch, FilesFollowTheUsersUmaskAndNoneIsWorldWritable) {
  for (const mode_t mask : {mode_t{022}, mode_t{077}}) {
    TempDir dir("ddph-umask");
    const std::string out = dir.path() + "/out";
    const mode_t before = ::umask(mask);  // inherited by the commands below
    ::mkdir(out.c_str(), 0777);  // the user's folder for the reports; the trace folder is made by the launcher
    const auto audited = runCommand(
        {kSim, "launch", "--audit", "--trace-dir", out + "/traces", "--report", out + "/audit.json",
         "--html", out + "/audit.html", "-n", "2", "--timeout", "240", "--", kPython,
         kPrograms + "/healthy.py"},
        300s);
    const auto run = runCommand({kSim, "run", "healthy", "-n", "2", "--report", out + "/run.json",
                                 "--html", out + "/run.html", "-q"},
                                300s);
    ::umask(before);
    ASSERT_EQ(audited.exitCode, 0) << audited.out << audited.err;
    ASSERT_EQ(run.exitCode, 0) << run.out << run.err;
    int files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(out)) {
      const auto mode = static_cast<mode_t>(entry.status().permissions()) & 0777;
      const mode_t expected = (entry.is_directory() ? 0777 : 0666) & ~mask;
      EXPECT_EQ(mode, expected) << entry.path() << " under umask 0" << std::oct << mask;
      EXPECT_EQ(mode & S_IWOTH, 0u) << entry.path();
      files += entry.is_regular_file() ? 1 : 0;
    }
    EXPECT_GE(files, 6) << "2 rank traces, the launch record, 2 JSON reports, 2 pages";
  }
}

// --- unmodified PyTorch scripts (integration/audit_programs/), each one bug -------------------

std::vector<std::string> python(const std::string& program, std::vector<std::string> args = {}) {
  std::vector<std::string> command = {kPython, kPrograms + "/" + program};
  command.insert(command.end(), args.begin(), args.end());
  return command;
}

std::string text(const Json& v, const char* key) {
  return v.contains(key) && v[key].is_string() ? v[key].get<std::string>() : "";
}

TEST(AuditPython, HealthyTwoDatasetsWithCycleAndEvaluationHasNoFinding) {
  for (int world : {2, 4}) {
    const auto a = launchAudited(world, python("healthy.py"));
    ASSERT_EQ(a.command.exitCode, 0) << shown(a);
    EXPECT_TRUE(a.report["passed"].get<bool>()) << shown(a);
    EXPECT_TRUE(a.report["notes"].empty()) << shown(a);
    EXPECT_EQ(a.report["seen"]["loaders"].size(), 3u) << shown(a);
  }
}

// scripts/gpu-check.sh audits ddp_on_device.py on CUDA with NCCL; here its CPU form keeps the
// program and the check's expectations honest: healthy (a DDP allreduce per backward), and
// `reshuffle` without set_epoch.
TEST(AuditPython, GpuCheckProgramOnTheCpuIsHealthyAndItsBrokenFormIsReshuffle) {
  auto program = python("ddp_on_device.py");
  program.insert(program.end(), {"--device", "cpu"});
  const auto a = launchAudited(2, program);
  ASSERT_EQ(a.command.exitCode, 0) << shown(a);
  EXPECT_TRUE(a.report["passed"].get<bool>()) << shown(a);
  EXPECT_EQ(a.report["seen"]["collectives_by_op"]["all_reduce (DDP)"], 24) << shown(a);
  program.push_back("--no-set-epoch");
  const auto broken = launchAudited(2, program);
  EXPECT_EQ(broken.command.exitCode, 1) << shown(broken);
  EXPECT_EQ(onlyViolation(broken, "reshuffle")["epoch"], 0) << shown(broken);
}

TEST(AuditPython, MissingSetEpochIsReshuffle) {
  const auto a = launchAudited(4, python("missing_set_epoch.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = onlyViolation(a, "reshuffle");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "set_epoch is never called on sampler 0")) << shown(a);
}

TEST(AuditPython, PerRankSeedBreaksCoverage) {
  const auto a = launchAudited(4, python("per_rank_seed.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "indices are on no rank")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "different seeds (0, 1, 2, 3)")) << shown(a);
  // The split that loses samples copies others: both promises broken, two findings of one cause
  // (NOTE [A split that loses and copies]), as the simulator's online checks report it.
  EXPECT_TRUE(has(v["notes"].dump(), "the same split puts samples on more than one rank too"))
      << shown(a);
  const Json d = onlyViolation(a, "disjointness");
  EXPECT_EQ(d["epoch"], 0);
  EXPECT_TRUE(has(text(d, "detail"), "extra copies across ranks")) << shown(a);
  EXPECT_EQ(text(d, "likely_cause"), text(v, "likely_cause")) << shown(a);
  EXPECT_TRUE(has(d["notes"].dump(), "the same split leaves samples on no rank too")) << shown(a);
}

TEST(AuditPython, PerRankFileOrderBreaksCoverage) {
  const auto a = launchAudited(4, python("per_rank_file_order.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = onlyViolation(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  EXPECT_TRUE(has(text(v, "detail"), "list their samples in different orders")) << shown(a);
  EXPECT_TRUE(has(text(v, "help"), "sorted(os.listdir(root))")) << shown(a);
}

TEST(AuditPython, ZipLeavesEightyEightSamplesUnseen) {
  const auto a = launchAudited(4, python("zip_truncation.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "coverage");
  EXPECT_EQ(v["epoch"], 0);
  // 600 samples on 4 ranks, batch 64: 3 batches a rank; the 500-sample loader has 2, so zip uses
  // 2 x 64 x 4 = 512 samples and throws the third batch away.
  EXPECT_TRUE(has(text(v, "detail"), "only 512 of its 600 samples were consumed")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "88 of 600 indices are on no rank")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "when loader 1 (TensorDataset, 500 samples) ran out")) << shown(a);
}

TEST(AuditPython, UnevenStepsAreACollectiveMismatchNamingWhereRanksParted) {
  const auto a = launchAudited(4, python("uneven_steps.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json m = onlyViolation(a, "collective-mismatch");
  EXPECT_EQ(m["ranks"], Json::array({0})) << shown(a);
  EXPECT_TRUE(has(text(m, "detail"), "ranks 1, 2, 3 never entered")) << shown(a);
  EXPECT_TRUE(has(text(m, "detail"), "the ranks parted at epoch 0")) << shown(a);
  EXPECT_TRUE(has(text(m, "help"), "join()")) << shown(a);
  // Gloo then fails rank 0's extra allreduce when the others exit.
  const Json f = onlyViolation(a, "rank-failure");
  EXPECT_EQ(f["ranks"], Json::array({0})) << shown(a);
  EXPECT_TRUE(has(text(f, "detail"), "it was in collective #")) << shown(a);
}

TEST(AuditPython, DesynchronisedCollectiveHangsAndIsNamed) {
  // Gloo does not notice the size mismatch: two ranks block in it, the others in the next step's
  // allreduce. The launcher's deadline ends the hang; the audit says where each rank was.
  const auto a = launchAudited(4, python("desync_collective.py"), 60);
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json m = onlyViolation(a, "collective-mismatch");
  EXPECT_TRUE(has(text(m, "detail"), "differs across ranks")) << shown(a);
  EXPECT_TRUE(has(text(m, "detail"), "rank 1 all_reduce float32[3]")) << shown(a);
  EXPECT_TRUE(has(text(m, "likely_cause"), "rank 1 called all_reduce at desync_collective.py:46 in "
                                           "main with float32[3] where the others passed "
                                           "float32[2]"))
      << shown(a);
  const auto failures = violationsOf(a, "rank-failure");
  EXPECT_FALSE(failures.empty()) << shown(a);
  for (const auto& f : failures) {
    EXPECT_TRUE(has(text(f, "detail"), "still running at the launcher's timeout")) << shown(a);
  }
}

TEST(AuditPython, ARankHungInItsDataIsTheRankThatNeverArrived) {
  // Rank 0 blocks reading sample 100 (its step 1); the others time out after 10 s inside DDP's
  // forward, in a collective torch makes itself (no `coll` line): rank 0 is the finding, not the
  // same error on ranks 1, 2, 3.
  const auto a = launchAudited(4, python("rank_hangs_in_data.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json f = onlyViolation(a, "rank-failure");
  EXPECT_EQ(f["ranks"], Json::array({0})) << shown(a);
  EXPECT_EQ(f["epoch"], 0) << shown(a);
  EXPECT_EQ(f["step"], 0) << shown(a);
  EXPECT_TRUE(has(text(f, "detail"), "rank 0 never reached the collective the others waited in"))
      << shown(a);
  EXPECT_TRUE(has(text(f, "detail"), "ranks 1, 2, 3 waited in it")) << shown(a);
  EXPECT_TRUE(has(text(f, "likely_cause"), "hung or slow outside any collective")) << shown(a);
}

TEST(AuditPython, FewerValidationSamplesThanRanksWithDropLastEvaluatesNothing) {
  // DistributedSampler(drop_last=True) over 3 samples on 4 ranks: num_samples = 0, drop_last's
  // "N % W tail" is the whole set, so it is judged by full coverage.
  const auto a = launchAudited(4, python("eval_fewer_samples_than_ranks.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "coverage");
  EXPECT_EQ(v["epoch"], 0) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "3 of 3 indices are on no rank")) << shown(a);
  EXPECT_TRUE(has(text(v, "likely_cause"), "N = 3 < W = 4 gives num_samples = 0")) << shown(a);
}

TEST(AuditPython, PaddedEvaluationCountsDuplicates) {
  const auto a = launchAudited(4, python("eval_padding.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "no-duplicates");
  EXPECT_TRUE(has(text(v, "detail"), "evaluated 12 samples for 10 distinct, 2 counted twice")) << shown(a);
}

TEST(AuditPython, PaddedEvaluationDrivenForLenLoaderBatchesCountsDuplicates) {
  // Lightning's way, and `for _ in range(len(loader)): next(it)`: no pass reaches StopIteration,
  // yet a pass that handed out len(loader) batches is complete, and its padding is judged.
  const auto a = launchAudited(4, python("eval_padding.py", {"--len-loop"}));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "no-duplicates");
  EXPECT_TRUE(has(text(v, "detail"), "evaluated 12 samples for 10 distinct, 2 counted twice")) << shown(a);
}

TEST(AuditPython, OptimizerOnRankZeroOnlyBreaksReplicaConsistency) {
  const auto a = launchAudited(4, python("optimizer_rank0_only.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "replica-consistency");
  EXPECT_EQ(v["ranks"], Json::array({0})) << shown(a);
  EXPECT_EQ(v["epoch"], 1);
}

TEST(AuditPython, BackwardWithoutStepIsParameterUpdates) {
  const auto a = launchAudited(4, python("backward_without_step.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  ASSERT_EQ(a.report["violations"].size(), 1u) << shown(a);
  const Json v = onlyViolation(a, "parameter-updates");
  EXPECT_EQ(v["ranks"], Json::array({0, 1, 2, 3})) << shown(a);
}

TEST(AuditPython, OverlappingCustomSamplerBreaksDisjointness) {
  const auto a = launchAudited(4, python("custom_overlapping_sampler.py"));
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json v = onlyViolation(a, "disjointness");
  EXPECT_TRUE(has(text(v, "detail"), "ShardSampler")) << shown(a);
  EXPECT_TRUE(has(text(v, "detail"), "extra copies across ranks")) << shown(a);
}

TEST(AuditPython, SigkilledRankTraceIsRead) {
  // Rank 1 SIGKILLs itself at its third batch: a trace without an end, its file never cut to its
  // lines; rank 0 then fails in Gloo.
  const auto a = launchAudited(
      2, {kPython, "-c",
          "import os, signal, torch, torch.distributed as dist\n"
          "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n"
          "dist.init_process_group('gloo')\n"
          "ds = TensorDataset(torch.arange(40.).unsqueeze(1))\n"
          "model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))\n"
          "for step, (x,) in enumerate(DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds))):\n"
          "    if step == 2 and dist.get_rank() == 1: os.kill(os.getpid(), signal.SIGKILL)\n"
          "    model(x).sum().backward()\n"});
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  // The kill fell between two lines: the file's reserved tail (NUL bytes) is no cut line.
  EXPECT_TRUE(a.report["notes"].empty()) << shown(a);
  bool named = false;
  for (const auto& f : violationsOf(a, "rank-failure")) {
    if (f["ranks"] == Json::array({1})) {
      named = true;
      EXPECT_TRUE(has(text(f, "detail"), "killed by signal 9 (SIGKILL)")) << shown(a);
      EXPECT_TRUE(has(text(f, "detail"), "at epoch 0 step 2")) << shown(a);
    }
  }
  EXPECT_TRUE(named) << shown(a);
}

TEST(AuditPython, InterruptedLauncherStillAuditsAndExits130) {
  // Both ranks take one DDP step, then wait forever; once both traces show the step done, the
  // launcher gets SIGINT: it stops the ranks, audits what they recorded, and exits 128 + 2.
  TempDir dir("ddph-audit-launch");
  const std::string traces = dir.path() + "/trace", report = dir.path() + "/report.json";
  ChildProcess launcher(
      {kSim, "launch", "--audit", "--trace-dir", traces, "--report", report, "-n", "2", "--",
       kPython, "-c",
       "import threading, torch, torch.distributed as dist\n"
       "dist.init_process_group('gloo')\n"
       "model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))\n"
       "model(torch.ones(2, 1)).sum().backward()\n"
       "threading.Event().wait()\n"},
      childOptions({{"TMPDIR", dir.path()}}, dir.path() + "/out", dir.path() + "/err"));
  auto stepped = [&](int rank) {
    const std::string file = traces + "/rank-" + std::to_string(rank) + ".jsonl";
    return fs::exists(file) && has(readFile(file), "\"coll_done\"");
  };
  ASSERT_TRUE(eventually([&] { return stepped(0) && stepped(1); }, 120s))
      << readFile(dir.path() + "/err");
  launcher.signal(SIGINT);
  EXPECT_EQ(exitCodeBy(launcher, std::chrono::steady_clock::now() + 120s), 130)
      << readFile(dir.path() + "/err");
  const Json r = Json::parse(readFile(report));
  EXPECT_EQ(r["interrupted_by_signal"], 2) << r.dump(2);
  EXPECT_EQ(r["ranks_traced"], 2) << r.dump(2);
  // The user's own stop is no finding: a note says where the run was, the verdict is no PASS.
  EXPECT_TRUE(r["violations"].empty()) << r.dump(2);
  ASSERT_EQ(r["notes"].size(), 1u) << r.dump(2);
  EXPECT_TRUE(has(r["notes"][0].get<std::string>(),
                  "the run was interrupted by SIGINT (the user's stop, not a failure): the "
                  "launcher stopped 2 of 2 ranks"))
      << r.dump(2);
  const std::string out = readFile(dir.path() + "/out"), err = readFile(dir.path() + "/err");
  EXPECT_TRUE(has(out, "(2 of 2 ranks traced): INTERRUPTED")) << out;
  EXPECT_TRUE(has(err, "ddp-sim launch: interrupted by SIGINT: stopped 2 ranks at ")) << err;
  EXPECT_TRUE(fs::exists(traces + "/launch.json"));  // --trace-dir is kept
}

TEST(AuditPython, ModuleModeUnderAnyLauncherThenAuditCommand) {
  // `python3 -m ddph_audit --trace-dir DIR train.py` under a launcher that only sets the env://
  // variables (ddp-sim launch without --audit), then `ddp-sim audit DIR`: module mode on every
  // torch, where the next test's real torchrun cannot start (Debian's torch 2.x, docs/torch2.md).
  TempDir dir("ddph-audit-launch");
  const std::string traces = dir.path() + "/trace";
  fs::create_directory(traces);
  const auto run = runCommand({kSim, "launch", "-n", "2", "--timeout", "240", "--", kPython, "-m",
                               "ddph_audit", "--trace-dir", traces,
                               kPrograms + "/missing_set_epoch.py"},
                              300s, "", {{"PYTHONPATH", DDPH_PYTHON_PACKAGE_DIR}});
  ASSERT_EQ(run.exitCode, 0) << run.out << run.err;  // the program itself is fine
  const auto audit = runCommand({kSim, "audit", traces}, 120s);
  EXPECT_EQ(audit.exitCode, 1) << audit.out << audit.err;
  EXPECT_TRUE(has(audit.out, "FAIL reshuffle at epoch 0")) << audit.out;
  EXPECT_TRUE(has(audit.out, "(2 of 2 ranks traced)")) << audit.out;
}

// torchrun (torch's own launcher, no ddp-sim) running `program` on 2 ranks, each as `python3 -m
// ddph_audit --trace-dir traces program`: what a cluster user does. The c10d rendezvous on
// 127.0.0.1 port 0 (a free port: ctest runs tests in parallel). `--redirects 9:0 --tee 9:0` steps
// around torch 1.13's `Std` parsing on Python 3.11 (docs/audit.md#on-a-cluster-torchrun-nccl).
// torchrun's TMPDIR is `tmp` (the test's folder): its log folders (torchelastic_*) go with it.
CommandResult torchrunAudited(const std::string& tmp, const std::string& traces, int maxRestarts,
                              const std::string& program, const std::string& marker) {
  return runCommand(
      {kPython, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
       "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:0", "--rdzv_id", "ddph-torchrun-test",
       "--max_restarts", std::to_string(maxRestarts), "--redirects", "9:0", "--tee", "9:0", "-m",
       "ddph_audit", "--trace-dir", traces, program},
      300s, marker, {{"PYTHONPATH", DDPH_PYTHON_PACKAGE_DIR}, {"TMPDIR", tmp}});
}

// Debian's torch 2.x: built without libuv, and torchrun's rendezvous store ignores USE_LIBUV.
bool torchrunCannotStart(const CommandResult& run) {
  return run.exitCode != 0 && has(run.err, "use_libuv was requested but PyTorch was buil");
}
constexpr const char* kNoTorchrun = "this torch's torchrun cannot start: built without libuv "
                                    "(docs/torch2.md)";

TEST(AuditPython, TorchrunRanksThenAuditCommand) {
  TempDir dir("ddph-audit-launch");
  const std::string traces = dir.path() + "/trace";
  fs::create_directory(traces);
  const std::string marker = uniqueMarker();
  const auto run = torchrunAudited(dir.path(), traces, 0, kPrograms + "/missing_set_epoch.py", marker);
  if (torchrunCannotStart(run)) GTEST_SKIP() << kNoTorchrun;
  ASSERT_EQ(run.exitCode, 0) << run.out << run.err;  // the program itself is fine
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 60s).empty());  // torchrun reaped its ranks
  for (int rank = 0; rank < 2; ++rank) {
    const std::string header = readFile(traces + "/rank-" + std::to_string(rank) + ".jsonl");
    EXPECT_TRUE(has(header.substr(0, header.find('\n')), "\"run_id\":\"ddph-torchrun-test\""))
        << header.substr(0, 400);  // torchrun's TORCHELASTIC_RUN_ID marks the run
  }
  const auto audit = runCommand({kSim, "audit", traces}, 120s);
  EXPECT_EQ(audit.exitCode, 1) << audit.out << audit.err;
  EXPECT_TRUE(has(audit.out, "FAIL reshuffle at epoch 0")) << audit.out;
  EXPECT_TRUE(has(audit.out, "(2 of 2 ranks traced)")) << audit.out;
}

TEST(AuditPython, TorchrunRestartKeepsTheFailedAttemptsTrace) {
  // Rank 1 raises in the first attempt; torchrun restarts both ranks, which write attempt-1/, and
  // ends 0. The first attempt's audit still names the failure; the second passes.
  TempDir dir("ddph-audit-launch");
  const std::string traces = dir.path() + "/trace";
  fs::create_directory(traces);
  const auto run =
      torchrunAudited(dir.path(), traces, 1, kPrograms + "/crash_first_attempt.py", uniqueMarker());
  if (torchrunCannotStart(run)) GTEST_SKIP() << kNoTorchrun;
  ASSERT_EQ(run.exitCode, 0) << run.out << run.err;
  const std::string report = dir.path() + "/first.json";
  const auto first = runCommand({kSim, "audit", traces, "--report", report}, 120s);
  EXPECT_EQ(first.exitCode, 1) << first.out << first.err;
  const Json r = Json::parse(readFile(report));
  EXPECT_EQ(r["attempt"], 0) << r.dump(2);
  EXPECT_EQ(r["later_attempts"], Json::array({traces + "/attempt-1"})) << r.dump(2);
  // Rank 0's error follows rank 1's exit (its connection to rank 1 closes), so by the headers'
  // wall clocks rank 1 raised first.
  EXPECT_TRUE(has(first.out,
                  "FAIL rank-failure at epoch 1 step 2 on rank 1: rank 1 raised "
                  "RuntimeError: out of "
                  "memory (simulated in the first attempt) at crash_first_attempt.py:"))
      << first.out;
  EXPECT_TRUE(has(first.out, "in main (the first rank to raise,")) << first.out;
  EXPECT_FALSE(has(first.out, "collective-mismatch")) << first.out;  // a crash, not uneven inputs
  EXPECT_TRUE(has(first.out, "audit the later attempts with ddp-sim audit " + traces + "/attempt-1"))
      << first.out;
  const auto second = runCommand({kSim, "audit", traces + "/attempt-1"}, 120s);
  EXPECT_EQ(second.exitCode, 0) << second.out << second.err;
  EXPECT_TRUE(has(second.out, "this report judges attempt 1 of the run")) << second.out;
}

// The scenarios' rank program writes the same trace: under launch --audit, the audit names the
// property the scenario's own online checks name (one verifier for scripts, C++ and scenarios).
TEST(AuditLaunch, ScenarioRanksAuditedNameTheScenarioProperty) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"missing-set-epoch", "reshuffle"},      {"rank-seed-skew", "coverage"},
      {"unsorted-file-listing", "coverage"},   {"zip-truncation", "coverage"},
      {"uneven-batches-hang", "collective-mismatch"}, {"padding-inflates-eval", "no-duplicates"},
      {"rank-crash", "rank-failure"}};
  for (const auto& [scenario, property] : cases) {
    const auto a = launchAudited(4, {kSim, "rank-run", scenario});
    EXPECT_EQ(a.command.exitCode, 1) << scenario << "\n" << shown(a);
    ASSERT_FALSE(a.report.is_null()) << scenario << "\n" << shown(a);
    EXPECT_FALSE(violationsOf(a, property).empty()) << scenario << "\n" << shown(a);
  }
  const auto healthy = launchAudited(4, {kSim, "rank-run", "healthy"});
  EXPECT_EQ(healthy.command.exitCode, 0) << shown(healthy);
  EXPECT_TRUE(healthy.report["passed"].get<bool>()) << shown(healthy);
}

// A rank stopped by SIGSTOP under ddp-sim launch: the launcher reads its state before the stop's
// SIGCONT (launch.json's was_stopped), and the audit names it as the rank that never arrived, as
// ddp-sim run does (SimRun.AStoppedRankIsAHangNamedAsTheRankThatNeverArrived).
TEST(AuditLaunch, AStoppedRankIsTheRankThatNeverArrived) {
  const auto a = launchAudited(4, {kSim, "rank-run", "rank-stopped"});
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const Json f = onlyViolation(a, "rank-failure");
  EXPECT_EQ(f["ranks"], Json::array({1})) << shown(a);
  EXPECT_EQ(f["step"], 3) << shown(a);
  EXPECT_TRUE(has(text(f, "detail"), "rank 1 never reached the collective the others waited in"))
      << shown(a);
  EXPECT_TRUE(has(text(f, "detail"), "(rank 1 was stopped, not crashed: state T")) << shown(a);
}

TEST(AuditLaunch, ARankThatNeverTracedIsNamedWithHowItEnded) {
  // ddp-train refuses a missing MNIST folder before it records anything: no rank file at all.
  TempDir dir("ddph-audit-launch");
  const auto a = launchAudited(2, {kTrain, "--mnist-dir", dir.path() + "/none"});
  ASSERT_EQ(a.command.exitCode, 1) << shown(a);
  const auto found = violationsOf(a, "rank-failure");
  // Whichever rank fails first; the launcher then stops the other, whose missing trace is that
  // failure's consequence (named only when it failed on its own before the stop: a race).
  ASSERT_GE(found.size(), 1u) << shown(a);
  ASSERT_LE(found.size(), 2u) << shown(a);
  EXPECT_TRUE(has(found[0]["detail"].get<std::string>(), "left no trace; it exited with code 2"))
      << shown(a);
}

TEST(AuditPython, ARankThatCalledOsExitIsNamedAsAPlainExit) {
  // Rank 1 leaves with os._exit(3) after its first batch: no exception, no trace end, no signal.
  const auto a = launchAudited(
      2, {kPython, "-c",
          "import os, torch, torch.distributed as dist\n"
          "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n"
          "dist.init_process_group('gloo')\n"
          "ds = TensorDataset(torch.arange(16).float())\n"
          "for b in DataLoader(ds, sampler=DistributedSampler(ds), batch_size=4):\n"
          "    if dist.get_rank() == 1: os._exit(3)\n"
          "    dist.barrier()\n"});
  EXPECT_EQ(a.command.exitCode, 1) << shown(a);
  const auto found = violationsOf(a, "rank-failure");
  ASSERT_GE(found.size(), 1u) << shown(a);
  EXPECT_EQ(found[0]["ranks"], Json::array({1})) << shown(a);
  EXPECT_TRUE(has(text(found[0], "detail"), "exited with code 3")) << shown(a);
  EXPECT_TRUE(has(text(found[0], "likely_cause"), "os._exit(3)")) << shown(a);
  EXPECT_FALSE(has(text(found[0], "likely_cause"), "SIGKILL")) << shown(a);
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
  EXPECT_TRUE(has(r.err, "--trace-dir, --report, --html and --resumes need --audit")) << r.err;
  const auto html = runCommand({kSim, "launch", "--html", "x.html", "-n", "1", "--", "/bin/true"}, 60s);
  EXPECT_EQ(html.exitCode, 2);
  EXPECT_TRUE(has(html.err, "--trace-dir, --report, --html and --resumes need --audit")) << html.err;
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
}  // namespace ddph::test_support
