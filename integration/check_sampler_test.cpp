// `ddp-sim check-sampler` end to end: the real torch DistributedSampler over the line protocol
// keeps the `pytorch` contract (within the throughput budget), the deliberately buggy example
// fails with its minimal counterexample and a replay command that reproduces it, built-ins run
// without any command, and broken samplers and bad arguments exit 2 with one clear line.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "test_support.h"

namespace ddph::test_support {
namespace {

using namespace std::chrono_literals;
using test_support::CommandResult;
using test_support::countLines;
using test_support::runCommand;

const std::string kDdpSim = DDPH_DDP_SIM;
const std::string kPython = DDPH_PYTHON;  // "" when no interpreter imports torch
const std::string kExamples = DDPH_EXAMPLES_DIR;

CommandResult checkSampler(std::vector<std::string> args, std::chrono::seconds timeout = 240s) {
  args.insert(args.begin(), {kDdpSim, "check-sampler"});
  return runCommand(args, timeout);
}

#define REQUIRE_TORCH_PYTHON() \
  if (kPython.empty()) GTEST_SKIP() << "no Python that imports torch (DDPH_PYTHON)"

std::string diagnostics(const CommandResult& r) {
  return "exit " + std::to_string(r.exitCode) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

TEST(CheckSampler, TorchDistributedSamplerKeepsPytorchContract) {
  REQUIRE_TORCH_PYTHON();
  // The default run: 100 cases a property (its time is a benchmark's figure: benchmarks.md).
  const CommandResult r = checkSampler({"--", kPython, kExamples + "/python/torch_sampler.py"});
  ASSERT_EQ(r.exitCode, 0) << diagnostics(r);
  EXPECT_EQ(countLines(r.out, "  ok   "), 7) << r.out;
  EXPECT_NE(r.out.find("check-sampler: PASSED: contract 'pytorch' holds"), std::string::npos);
  std::printf("default pytorch-contract run against torch's DistributedSampler: %.1f s\n", r.seconds);
}

TEST(CheckSampler, TorchDistributedSamplerVariantsKeepTheirContracts) {
  REQUIRE_TORCH_PYTHON();
  const auto adapter = kExamples + "/python/torch_sampler.py";
  CommandResult r = checkSampler(
      {"--contract", "drop-last", "--cases", "25", "--", kPython, adapter, "--drop-last"});
  EXPECT_EQ(r.exitCode, 0) << diagnostics(r);
  r = checkSampler({"--no-shuffle", "--cases", "25", "--", kPython, adapter, "--no-shuffle"});
  EXPECT_EQ(r.exitCode, 0) << diagnostics(r);
  // Under the wrong contract the real sampler is caught: its padding repeats an index. (Shrinking
  // finds a local minimum: at seed 0 it is N=3 W=2, where N=2 has no padding to shrink to.)
  r = checkSampler({"--contract", "exactly-once", "--cases", "25", "--", kPython, adapter});
  EXPECT_EQ(r.exitCode, 1) << diagnostics(r);
  EXPECT_EQ(countLines(r.out, "  FAIL "), 1) << r.out;
  EXPECT_NE(r.out.find("FAIL no-duplicates   minimal case N=3 W=2 epoch=0 seed=0"),
            std::string::npos)
      << r.out;
}

TEST(CheckSampler, BuggyExampleFailsWithMinimalCounterexampleAndReplay) {
  REQUIRE_TORCH_PYTHON();
  const auto buggy = kExamples + "/python/buggy_sampler.py";
  const CommandResult r = checkSampler({"--seed", "3", "--", kPython, buggy});
  ASSERT_EQ(r.exitCode, 1) << diagnostics(r);
  // Exactly one property fails, with the smallest case: one sample, two ranks.
  EXPECT_EQ(countLines(r.out, "  FAIL "), 1) << r.out;
  EXPECT_NE(r.out.find("  FAIL equal-length    minimal case N=1 W=2 epoch=0 seed=0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 0 yields 1 indices but rank 1 yields 0"), std::string::npos) << r.out;
  const std::string req0 = R"({"dataset_size":1,"num_replicas":2,"rank":0,"epoch":0,"seed":0})";
  const std::string req1 = R"({"dataset_size":1,"num_replicas":2,"rank":1,"epoch":0,"seed":0})";
  EXPECT_NE(r.out.find(req0 + "\n           -> {\"indices\":[0]}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(req1 + "\n           -> {\"indices\":[]}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check-sampler: FAILED: 1 of 7 properties of contract 'pytorch' violated "
                       "(equal-length)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("repeat this search: ddp-sim check-sampler --contract pytorch --cases 100 "
                       "--seed 3 -- "),
            std::string::npos)
      << r.out;

  // The printed replay command, run by a shell, shows the sampler's two answers.
  const auto at = r.out.find("replay: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string replay = r.out.substr(at + 8, r.out.find('\n', at) - at - 8);
  EXPECT_EQ(replay.rfind("printf '%s\\n' '" + req0 + "' '" + req1 + "' | ", 0), 0u) << replay;
  const CommandResult replayed = runCommand({"/bin/sh", "-c", replay}, 60s);
  EXPECT_EQ(replayed.exitCode, 0) << diagnostics(replayed);
  EXPECT_EQ(replayed.out, "{\"indices\": [0]}\n{\"indices\": []}\n");
}

TEST(CheckSampler, BuggyExampleIsRightForEvaluation) {
  REQUIRE_TORCH_PYTHON();
  const CommandResult r = checkSampler(
      {"--contract", "exactly-once", "--cases", "50", "--", kPython, kExamples + "/python/buggy_sampler.py"});
  EXPECT_EQ(r.exitCode, 0) << diagnostics(r);
}

TEST(CheckSampler, APythonSamplerClassIsServedByTheHelperAndShownWhole) {
  REQUIRE_TORCH_PYTHON();
  // `python3 -m ddph_audit.serve_sampler FILE:Class`: no adapter loop of the user's own, and no
  // PYTHONPATH of theirs either (check-sampler puts its own package on the command's path). The
  // class loses position 30 of a 31-index shard to a copy: the answer of the minimal case is
  // shown whole, so the copy can be seen in the report.
  test_support::TempDir dir("ddph-check-sampler");
  const std::string file = dir.path() + "/late_copy.py";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("class LateCopy:\n"
             "    def __init__(self, data, num_replicas, rank):\n"
             "        self.idx = list(range(len(data)))[rank::num_replicas]\n"
             "        if len(self.idx) > 30:\n"
             "            self.idx[30] = self.idx[17]\n"
             "    def __iter__(self):\n"
             "        return iter(self.idx)\n"
             "    def __len__(self):\n"
             "        return len(self.idx)\n",
             f);
  std::fclose(f);
  const auto r = runCommand({kDdpSim, "check-sampler", "--contract", "exactly-once", "--", kPython,
                             "-m", "ddph_audit.serve_sampler", file + ":LateCopy"},
                            240s, "", {{"PYTHONPATH", ""}});
  EXPECT_EQ(r.exitCode, 1) << diagnostics(r);
  EXPECT_NE(r.out.find("FAIL no-duplicates"), std::string::npos) << diagnostics(r);
  EXPECT_NE(r.out.find("26,27,28,29,17]"), std::string::npos) << diagnostics(r);
}

TEST(CheckSampler, BuiltinsNeedNoCommand) {
  CommandResult r = checkSampler({"--builtin", "pytorch"});
  EXPECT_EQ(r.exitCode, 0) << diagnostics(r);
  r = checkSampler({"--builtin", "pytorch", "--contract", "drop-last"});
  EXPECT_EQ(r.exitCode, 0) << diagnostics(r);
  // LibTorch's C++ samplers do not keep PyTorch's contract (see the README): the run reports
  // violations, each with a replay through `ddp-sim sampler`.
  for (const std::string name : {"libtorch-random", "libtorch-sequential"}) {
    r = checkSampler({"--builtin", name});
    EXPECT_EQ(r.exitCode, 1) << name << "\n" << diagnostics(r);
    EXPECT_NE(r.out.find("replay: ddp-sim sampler --sampler " + name), std::string::npos) << r.out;
  }
  // A sampler asked for an epoch that it ignores: its own fault, not a program's set_epoch, and
  // the seed + epoch rule is seed-plus-epoch's, not determinism's.
  EXPECT_NE(r.out.find("likely cause: the sampler's order does not follow the epoch it is asked for"),
            std::string::npos)
      << r.out;
  r = checkSampler({"--builtin", "libtorch-random"});
  EXPECT_NE(r.out.find("  FAIL seed-plus-epoch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  ok   determinism"), std::string::npos) << r.out;
  // Composing: the port pads, so no-duplicates fails and padding holds.
  r = checkSampler({"--builtin", "pytorch", "--properties", "padding,no-duplicates"});
  EXPECT_EQ(r.exitCode, 1) << diagnostics(r);
  EXPECT_NE(r.out.find("  ok   padding"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  FAIL no-duplicates"), std::string::npos) << r.out;
}

TEST(CheckSampler, RefusingAValidRequestIsAViolation) {
  // Answers {"error": …} from four ranks up: the search shrinks to the first world it refuses.
  const char* refuses = R"(
import json, sys
for line in sys.stdin:
    q = json.loads(line)
    if q["num_replicas"] > 3:
        print(json.dumps({"error": "at most 3 replicas"}), flush=True)
    else:
        n, w, r = q["dataset_size"], q["num_replicas"], q["rank"]
        print(json.dumps({"indices": [i % max(n, 1) for i in range(r, -(-n // w) * w, w)] if n else []}), flush=True)
)";
  const CommandResult r = checkSampler({"--properties", "valid-range", "--", "/usr/bin/python3", "-c", refuses});
  EXPECT_EQ(r.exitCode, 1) << diagnostics(r);
  EXPECT_NE(r.out.find("FAIL valid-range     minimal case N=0 W=4 epoch=0 seed=0"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("the sampler rejected a valid request"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at most 3 replicas"), std::string::npos) << r.out;
}

// Starts `ddp-sim check-sampler ARGS` for each ARGS at once. A checker that hangs is killed at
// the deadline and reports exit -1 (the hanging sampler below sleeps 600 s, far past it); the
// deadline is generous because a start of ddp-sim (loading LibTorch) takes seconds on a busy
// machine.
std::vector<CommandResult> checkSamplers(const std::vector<std::vector<std::string>>& argss) {
  std::vector<std::vector<std::string>> argvs;
  for (auto args : argss) {
    args.insert(args.begin(), {kDdpSim, "check-sampler"});
    argvs.push_back(std::move(args));
  }
  return test_support::runCommands(argvs, 240s);
}

// A broken sampler is not a counterexample: exit 2, one line on stderr.
TEST(CheckSampler, BrokenSamplersExit2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--", "/bin/sh", "-c", "while read l; do echo garbage; done"}, "not JSON: 'garbage'"},
      {{"--", "/bin/sh", "-c", "read l; exit 7"}, "exited with code 7"},
      {{"--timeout", "0.5", "--startup-timeout", "0.5", "--", "/bin/sh", "-c", "sleep 600"},
       "did not answer request 1 of 1"},
      {{"--", "/bin/sh", "-c", "read l; exec cat /dev/zero"}, "line longer than 64 MiB"},
      {{"--", "/bin/sh", "-c",
        R"(while read l; do echo '{"indices":[0]}'; echo '{"indices":[0]}'; done)"},
       "more lines than requests"}};
  std::vector<std::vector<std::string>> argss;
  for (const auto& c : cases) argss.push_back(c.first);
  const auto results = checkSamplers(argss);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const CommandResult& r = results[k];
    EXPECT_EQ(r.exitCode, 2) << cases[k].second << "\n" << diagnostics(r);
    EXPECT_EQ(countLines(r.err, "ddp-sim: error: "), 1) << r.err;
    EXPECT_NE(r.err.find(cases[k].second), std::string::npos) << r.err;
  }
}

TEST(CheckSampler, UsageErrorsExit2) {
  const auto results = checkSamplers({
      {"--builtin", "pytorch", "--contract", "no-such-contract"},
      {"--builtin", "pytorch", "--properties", "coverage,typo"},
      {"--builtin", "no-such-sampler"},
      {},                                          // neither a builtin nor a command
      {"--builtin", "pytorch", "--", "/bin/cat"},  // both
      {"--", "ddph-no-such-command"},
      {"--cases", "0", "--builtin", "pytorch"}});
  for (const CommandResult& r : results) {
    EXPECT_EQ(r.exitCode, 2) << diagnostics(r);
    EXPECT_EQ(countLines(r.err, "ddp-sim: error: "), 1) << r.err;
  }
}

TEST(CheckSampler, ListShowsContractsAndProperties) {
  const CommandResult r = checkSampler({"--list"});
  EXPECT_EQ(r.exitCode, 0);
  for (const char* name : {"pytorch", "drop-last", "exactly-once", "with-replacement",
                           "no-duplicates", "balanced-length", "ranks-agree"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
}

// --contract's help lists what --contract accepts, from the one table (elastic among them).
TEST(CheckSampler, HelpListsEveryAcceptedContract) {
  const CommandResult help = checkSampler({"--help"});
  ASSERT_EQ(help.exitCode, 0) << diagnostics(help);
  EXPECT_NE(help.out.find("pytorch | elastic | drop-last | exactly-once | with-replacement"),
            std::string::npos)
      << help.out;
  const CommandResult elastic = checkSampler({"--builtin", "elastic", "--contract", "elastic",
                                              "--cases", "5"});
  EXPECT_EQ(elastic.exitCode, 0) << diagnostics(elastic);
}

}  // namespace
}  // namespace ddph::test_support
