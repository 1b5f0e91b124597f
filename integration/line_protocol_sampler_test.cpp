// LineProtocolSampler against real child processes that keep or break the line protocol: every
// way of breaking it gives a ProtocolError naming what happened, the child is killed and reaped,
// and nothing hangs.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ddph/common/error.h"
#include "ddph/verify/contract.h"
#include "ddph/sampler/distributed_sampler.h"
#include "ddph/sampler/line_protocol_sampler.h"
#include "test_support.h"

namespace ddph::sampler {

using common::ConfigError;
using common::ProtocolError;
using verify::checkContract;
using verify::SearchOptions;

namespace {

using namespace std::chrono_literals;
using test_support::fileWritten;
using test_support::processGone;
using test_support::readFile;
using test_support::TempDir;

const char* kPython = "/usr/bin/python3";

// Evaluation sharding over the protocol, with declared lengths; rank -1 is refused.
const char* kStridedSampler = R"(
import json, sys
for line in sys.stdin:
    q = json.loads(line)
    if q["rank"] < 0:
        print(json.dumps({"error": "negative rank"}), flush=True)
        continue
    idx = list(range(q["rank"], q["dataset_size"], q["num_replicas"]))
    print(json.dumps({"indices": idx, "length": len(idx)}), flush=True)
)";

std::vector<std::string> python(const std::string& code) { return {kPython, "-c", code}; }
std::vector<std::string> sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

LineProtocolOptions fast() {
  LineProtocolOptions o;
  o.requestTimeout = 2s;
  o.startupTimeout = 10s;
  return o;
}

// Expects `call` to throw ProtocolError whose message contains `needle`; returns the message.
template <typename F>
std::string expectProtocolError(F&& call, const std::string& needle) {
  try {
    call();
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no ProtocolError (expected one mentioning '" << needle << "')";
  return {};
}

TEST(LineProtocolSampler, AnswersPartitionsWithDeclaredLengths) {
  LineProtocolSampler s(python(kStridedSampler), fast());
  const Partition p = s.partition({10, 4, 3, 7});
  ASSERT_EQ(p.numReplicas(), 4);
  EXPECT_EQ(p.ranks[1], (std::vector<Index>{1, 5, 9}));
  EXPECT_EQ(p.ranks[3], (std::vector<Index>{3, 7}));
  EXPECT_EQ(p.declaredLengths, (std::vector<std::int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(s.indices({10, 4, 2, 0, 0}), (std::vector<Index>{2, 6}));
  EXPECT_EQ(s.declaredLength({10, 4, 2, 0, 0}), 2);
  EXPECT_EQ(s.requestsAnswered(), 5);
  SearchOptions o;
  o.cases = 30;
  EXPECT_TRUE(checkContract(s, "exactly-once", o).passed());
  EXPECT_TRUE(s.alive());
}

TEST(LineProtocolSampler, TorchAdapterMatchesThePortExactly) {
  // The whole path (requests out, torch's DistributedSampler, answers back) agrees index for
  // index with the in-process port, declared lengths included, on a sweep of awkward cases.
  if (std::string(DDPH_PYTHON).empty()) GTEST_SKIP() << "no Python that imports torch";
  LineProtocolSampler torch({DDPH_PYTHON, std::string(DDPH_EXAMPLES_DIR) + "/python/torch_sampler.py"});
  LineProtocolSampler torchDropLast(
      {DDPH_PYTHON, std::string(DDPH_EXAMPLES_DIR) + "/python/torch_sampler.py", "--drop-last"});
  DistributedSampler port;
  DistributedSampler portDropLast({/*shuffle=*/true, /*dropLast=*/true});
  const std::int64_t seeds[] = {0, 7, -3, std::int64_t{1} << 40};
  int compared = 0;
  for (std::int64_t n : {0, 1, 2, 5, 13, 64, 1000}) {
    for (std::int64_t w : {1, 2, 3, 8, 64}) {
      for (std::int64_t seed : seeds) {
        const std::int64_t epoch = (n + w) % 5;
        const Partition a = torch.partition({n, w, epoch, seed});
        const Partition b = port.partition({n, w, epoch, seed});
        ASSERT_EQ(a.ranks, b.ranks) << "N=" << n << " W=" << w << " seed=" << seed;
        ASSERT_EQ(a.declaredLengths, b.declaredLengths) << "N=" << n << " W=" << w;
        const Partition c = torchDropLast.partition({n, w, epoch, seed});
        const Partition d = portDropLast.partition({n, w, epoch, seed});
        ASSERT_EQ(c.ranks, d.ranks) << "drop_last N=" << n << " W=" << w << " seed=" << seed;
        ASSERT_EQ(c.declaredLengths, d.declaredLengths);
        compared += 2;
      }
    }
  }
  EXPECT_EQ(compared, 7 * 5 * 4 * 2);
  // A request torch rejects (rank outside [0, W)) comes back as its error, not a crash.
  EXPECT_THROW(torch.indices({4, 2, 5, 0, 0}), ConfigError);
  EXPECT_TRUE(torch.alive());
}

TEST(LineProtocolSampler, ErrorAnswerRejectsOnlyThatRequest) {
  LineProtocolSampler s(python(kStridedSampler), fast());
  try {
    s.indices({4, 2, -1, 0, 0});
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("negative rank"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(s.alive());
  EXPECT_EQ(s.indices({4, 2, 1, 0, 0}), (std::vector<Index>{1, 3}));
}

TEST(LineProtocolSampler, GarbageKillsTheSampler) {
  LineProtocolSampler s(sh("while read l; do echo hello; done"), fast());
  expectProtocolError([&] { s.indices({3, 1, 0, 0, 0}); }, "not JSON: 'hello'");
  EXPECT_FALSE(s.alive());
  // Later calls repeat the failure without asking again.
  expectProtocolError([&] { s.partition({3, 2, 0, 0}); }, "not JSON");
}

TEST(LineProtocolSampler, MalformedAnswersAreProtocolErrors) {
  {
    LineProtocolSampler s(sh(R"(while read l; do echo '{"idx":[1]}'; done)"), fast());
    expectProtocolError([&] { s.indices({3, 1, 0, 0, 0}); }, "neither \"indices\"");
  }
  {
    LineProtocolSampler s(sh(R"(while read l; do echo '{"indices":[1.5]}'; done)"), fast());
    expectProtocolError([&] { s.indices({3, 1, 0, 0, 0}); }, "non-integer index 1.5");
  }
  {
    LineProtocolSampler s(sh(R"(while read l; do echo '{"indices":[1],"length":"x"}'; done)"), fast());
    expectProtocolError([&] { s.indices({3, 1, 0, 0, 0}); }, "non-integer \"length\"");
  }
}

TEST(LineProtocolSampler, CrashReportsTheExitStatus) {
  {
    LineProtocolSampler s(sh("read l; exit 3"), fast());
    expectProtocolError([&] { s.indices({3, 1, 0, 0, 0}); }, "exited with code 3");
  }
  {
    LineProtocolSampler s(sh("read l; kill -SEGV $$"), fast());
    expectProtocolError([&] { s.partition({3, 2, 0, 0}); }, "killed by signal 11");
  }
}

TEST(LineProtocolSampler, HangTimesOutAndKillsTheProcessGroup) {
  TempDir dir;
  const std::string pidFile = dir.path() + "/pid";
  LineProtocolOptions o = fast();
  o.requestTimeout = 300ms;
  o.startupTimeout = 300ms;
  // The shell starts a grandchild and neither answers: the whole group must go. The request goes
  // once the grandchild's pid is written; only the timeout can end it ("did not answer", not
  // "closed its stdout": the shell sleeps for 10 minutes).
  LineProtocolSampler s(sh("sleep 600 & echo $! > " + pidFile + "; sleep 600"), o);
  ASSERT_TRUE(fileWritten(pidFile, 120s));
  expectProtocolError([&] { s.partition({5, 2, 0, 0}); }, "did not answer request 1 of 2");
  const std::string pid = readFile(pidFile);
  EXPECT_TRUE(processGone(std::stoi(pid))) << "grandchild " << pid << " survived";
}

TEST(LineProtocolSampler, TooFewLinesTimeOut) {
  // Answers the first request only, then keeps reading without answering.
  LineProtocolOptions o = fast();
  o.requestTimeout = 300ms;
  LineProtocolSampler s(sh(R"(read l; echo '{"indices":[0]}'; cat > /dev/null)"), o);
  expectProtocolError([&] { s.partition({3, 3, 0, 0}); }, "did not answer request 2 of 3");
}

TEST(LineProtocolSampler, TooManyLinesAreCaught) {
  TempDir dir;
  {  // Two lines a request, in one write; a file says both answers are in the pipe.
    const std::string written = dir.path() + "/two-answered";
    LineProtocolSampler s(sh(R"(n=0; while read l; do printf '{"indices":[]}\n{"indices":[]}\n'; )"
                             R"(n=$((n+1)); [ $n = 2 ] && echo done > )" + written + "; done"),
                          fast());
    // Lines carry no request id, so the surplus is caught at the latest before the next request.
    expectProtocolError(
        [&] {
          s.partition({2, 2, 0, 0});
          ASSERT_TRUE(fileWritten(written, 120s));
          s.partition({2, 2, 0, 0});
        },
        "more lines than requests");
  }
  {  // An extra line that arrives after the answer was taken: caught before the next request.
     // Files order it: the test says "answered" once indices() returned, the sampler says
     // "written" once the extra line is in the pipe.
    const std::string answered = dir.path() + "/answered", written = dir.path() + "/written";
    LineProtocolSampler s(
        python("import os, sys, time\nfor l in sys.stdin:\n    print('{\"indices\":[]}', flush=True)\n"
               "    end = time.monotonic() + 120\n"
               "    while not os.path.exists('" + answered + "') and time.monotonic() < end:\n"
               "        time.sleep(0.01)\n"
               "    print('{\"indices\":[9]}', flush=True)\n"
               "    open('" + written + "', 'w').write('done')\n"),
        fast());
    EXPECT_TRUE(s.indices({0, 1, 0, 0, 0}).empty());
    std::ofstream(answered) << "done";
    ASSERT_TRUE(fileWritten(written, 120s));
    expectProtocolError([&] { s.indices({0, 1, 0, 0, 0}); }, "more lines than requests");
  }
}

TEST(LineProtocolSampler, FloodsAreCutOff) {
  {  // One endless line.
    LineProtocolOptions o = fast();
    o.maxLineBytes = 1 << 20;
    LineProtocolSampler s(sh("read l; exec cat /dev/zero"), o);
    expectProtocolError([&] { s.indices({3, 1, 0, 0, 0}); }, "line longer than 1 MiB");
  }
  {  // Valid lines, too much in all for one partition.
    LineProtocolOptions o = fast();
    o.maxBatchBytes = 1 << 20;
    LineProtocolSampler s(
        python("import sys\nfor l in sys.stdin:\n    print('{\"indices\":[' + ','.join(['0'] * "
               "40000) + ']}', flush=True)\n"),
        o);
    expectProtocolError([&] { s.partition({1, 64, 0, 0}); }, "with more than 1 MiB");
  }
}

TEST(LineProtocolSampler, SamplerThatStopsReadingDoesNotKillTheChecker) {
  // Exits at once: the requests (more than a pipe buffer) hit a closed pipe (EPIPE, no SIGPIPE),
  // whether it exited before the first write or while the pipe was full.
  LineProtocolSampler s(sh("exit 0"), fast());
  expectProtocolError([&] { s.partition({0, 5000, 0, 0}); }, "exited with code 0");
}

TEST(LineProtocolSampler, BadCommandsAreConfigErrors) {
  EXPECT_THROW(LineProtocolSampler({"ddph-no-such-sampler-command"}), ConfigError);
  EXPECT_THROW(LineProtocolSampler({"/nonexistent/sampler"}), ConfigError);
  EXPECT_THROW(LineProtocolSampler(std::vector<std::string>{}), ConfigError);
}

TEST(LineProtocolSampler, DestructorKillsASamplerThatIgnoresEof) {
  TempDir dir;
  const std::string pidFile = dir.path() + "/pid";
  LineProtocolOptions o = fast();
  o.exitGrace = 200ms;
  {
    // Sleeps 10 minutes: the destructor returns only because it kills it (else ctest's timeout).
    LineProtocolSampler s(sh("echo $$ > " + pidFile + "; trap '' TERM; exec sleep 600"), o);
    ASSERT_TRUE(fileWritten(pidFile, 120s));
  }
  EXPECT_TRUE(processGone(std::stoi(readFile(pidFile))));
}

TEST(LineProtocolSampler, NameIsTheShellQuotedCommand) {
  LineProtocolSampler s({"/bin/sh", "-c", "cat > /dev/null", "it's"}, fast());
  EXPECT_EQ(s.name(), R"(/bin/sh -c 'cat > /dev/null' 'it'\''s')");
}

}  // namespace
}  // namespace ddph::sampler
