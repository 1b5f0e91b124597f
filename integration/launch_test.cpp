// ddp-sim launch: env variables, prefixed output, failure propagation, timeout, signals, and no
// orphan left in the process table afterwards.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ddph/launch/launcher.h"
#include "test_support.h"

using namespace std::chrono_literals;

namespace ddph::test_support {

using common::ChildOptions;
using common::ChildProcess;
using common::StreamTarget;

namespace {

const std::string kSim = DDPH_DDP_SIM;

std::vector<std::string> launch(std::vector<std::string> extra, std::vector<std::string> command) {
  std::vector<std::string> argv{kSim, "launch"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

TEST(Launch, SetsTorchrunVariablesAndPrefixesOutput) {
  const auto marker = uniqueMarker();
  const auto r = runCommand(
      launch({"-n", "3"}, {"/bin/sh", "-c",
                           "echo R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LW=$LOCAL_WORLD_SIZE "
                           "RC=$TORCHELASTIC_RESTART_COUNT A=$MASTER_ADDR P=$MASTER_PORT; "
                           "echo to-stderr >&2"}),
      60s, marker, {{"TORCHELASTIC_RESTART_COUNT", "3"}});  // inherited: each rank is attempt 0
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string line = "[rank" + std::to_string(rank) + "]: R=" + std::to_string(rank) +
                             " L=" + std::to_string(rank) + " W=3 LW=3 RC=0 A=127.0.0.1 P=";
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("[rank" + std::to_string(rank) + "]: to-stderr"), std::string::npos);
  }
  EXPECT_EQ(r.out.find("P=0\n"), std::string::npos) << "MASTER_PORT must be a real free port";
}

// Ranks writing far more than a pipe holds (64 KiB), on stdout and stderr at once: the launcher
// drains every pipe while it waits, so no rank blocks for good on a full pipe, and every line
// arrives once, prefixed, in order.
TEST(Launch, RanksFloodingBothPipesLoseNoLine) {
  const auto r = runCommand(launch({"-n", "3"}, {"/bin/sh", "-c", "seq 1 200000; seq 1 200000 >&2"}),
                            300s);
  ASSERT_EQ(r.exitCode, 0) << r.err.substr(0, 2000);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string prefix = "[rank" + std::to_string(rank) + "]: ";
    for (const std::string* text : {&r.out, &r.err}) {
      std::istringstream lines(*text);
      std::string line;
      long expected = 1;
      bool inOrder = true;
      while (std::getline(lines, line)) {
        if (line.rfind(prefix, 0) != 0) continue;
        inOrder = inOrder && line == prefix + std::to_string(expected);
        ++expected;
      }
      EXPECT_EQ(expected - 1, 200000) << prefix << (text == &r.out ? "stdout" : "stderr");
      EXPECT_TRUE(inOrder) << prefix;
    }
  }
}

// A rank writing 1 MiB without a newline (a progress bar redrawn with '\r' all epoch long): the
// launcher forwards it in parts of at most 64 KiB as they come, instead of holding it all until the
// newline; nothing is lost.
TEST(Launch, ALongLineWithoutNewlineIsForwardedInBoundedParts) {
  const auto r = runCommand(
      launch({"-n", "1"}, {"/bin/sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x; echo; echo done"}),
      120s);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::size_t xs = 0, longest = 0, parts = 0;
  bool done = false;
  while (std::getline(lines, line)) {
    ASSERT_EQ(line.rfind("[rank0]: ", 0), 0u) << line.substr(0, 80);
    const std::string body = line.substr(9);
    done = done || body == "done";
    if (body.empty() || body.find_first_not_of('x') != std::string::npos) continue;
    xs += body.size();
    longest = std::max(longest, body.size());
    ++parts;
  }
  EXPECT_EQ(xs, 1048576u);
  EXPECT_EQ(longest, 65536u);
  EXPECT_EQ(parts, 16u);
  EXPECT_TRUE(done);
}

TEST(Launch, RealGlooRanksJoinThroughEnvInit) {
  const auto r = runCommand(launch({"-n", "4", "--timeout", "60"}, {kSim, "rank-selftest"}), 90s);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(r.out.find("[rank" + std::to_string(rank) + "]: rank " + std::to_string(rank) +
                         " of 4: allreduce sum 10 (expected 10) ok"),
              std::string::npos)
        << r.out;
  }
}

TEST(Launch, NonZeroExitStopsTheOthersAndNamesTheRank) {
  const auto marker = uniqueMarker();
  const auto r = runCommand(
      launch({"-n", "4", "--grace", "2"},
             {"/bin/sh", "-c", "if [ $RANK = 1 ]; then sleep 0.5; exit 3; fi; exec sleep 60"}),
      30s, marker);
  EXPECT_EQ(r.exitCode, 1) << r.err;  // not -1: the others' `sleep 60` was stopped
  EXPECT_NE(r.err.find("rank 1 (pid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with code 3; stopped the other 3 ranks"), std::string::npos)
      << r.err;
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 5s).empty());
}

TEST(Launch, DeathBySignalIsNamed) {
  const auto marker = uniqueMarker();
  const auto r = runCommand(
      launch({"-n", "3"},
             {"/bin/sh", "-c", "if [ $RANK = 2 ]; then sleep 0.5; kill -9 $$; fi; sleep 60"}),
      30s, marker);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("rank 2 (pid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal 9 (SIGKILL)"), std::string::npos) << r.err;
  // sh's own child `sleep 60` is in the ranks' process group: it goes too.
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 5s).empty());
}

TEST(Launch, TimeoutStopsEveryRank) {
  const auto marker = uniqueMarker();
  const auto r = runCommand(launch({"-n", "2", "--timeout", "1", "--grace", "1"},
                                   {"/bin/sh", "-c", "trap '' TERM; sleep 60"}),
                            30s, marker);
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.err.find("still running at the timeout of 1 s"), std::string::npos) << r.err;
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 5s).empty());
}

// The launcher's own stdout not read at all (a stopped pager, a stuck log shipper) while its rank
// floods it: the launcher waits in its write, as a program writing to a terminal does, but its
// deadline still holds for the ranks (NOTE [Stuck output]): every rank is gone while the launcher
// is still waiting. Once its output is read, it ends naming the timeout; nothing read was dropped.
TEST(Launch, AStuckOutputDoesNotKeepRanksPastTheTimeout) {
  const auto marker = uniqueMarker();
  ChildOptions options = childOptions({{kMarkerVariable, marker}});
  options.out = StreamTarget::pipe();
  options.err = StreamTarget::pipe();
  ChildProcess launcher(launch({"-n", "2", "--timeout", "2", "--grace", "1"}, {"/usr/bin/yes"}),
                        std::move(options));
  const auto ranksGone = [&] { return processesWithMarker(marker, "yes").empty(); };
  const auto launcherAlive = [&] { return !launcher.poll().has_value(); };
  ASSERT_TRUE(eventually([&] { return !ranksGone(); }, 120s)) << "the ranks never started";
  // Nothing reads the launcher's stdout yet: its pipe and the ranks' fill up.
  EXPECT_TRUE(eventually(ranksGone, 180s)) << "ranks still running past the launcher's deadline";
  EXPECT_TRUE(launcherAlive()) << "the launcher was expected to wait for its output to be read";
  const int out = launcher.takePipe(1), err = launcher.takePipe(2);
  std::string errText;
  std::thread drainErr([&] {
    char buf[65536];
    for (ssize_t n; (n = ::read(err, buf, sizeof(buf))) > 0;) errText.append(buf, static_cast<std::size_t>(n));
  });
  char buf[65536];
  std::size_t lines = 0;
  for (ssize_t n; (n = ::read(out, buf, sizeof(buf))) > 0;) {
    lines += static_cast<std::size_t>(std::count(buf, buf + n, '\n'));
  }
  drainErr.join();
  ::close(out);
  ::close(err);
  EXPECT_EQ(exitCodeBy(launcher, std::chrono::steady_clock::now() + 120s), 1) << errText;
  EXPECT_NE(errText.find("still running at the timeout of 2 s"), std::string::npos) << errText;
  EXPECT_GT(lines, 0u);
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 60s).empty());
}

TEST(Launch, SigintStopsEveryRank) {
  TempDir dir;
  const auto marker = uniqueMarker();
  ChildProcess launcher(launch({"-n", "3"}, {"/bin/sleep", "60"}), 
                        childOptions({{kMarkerVariable, marker}}, dir.path() + "/out", dir.path() + "/err"));
  // Wait until the three ranks run `sleep` (a rank between fork and exec is still a ddp-sim).
  ASSERT_TRUE(eventually([&] { return processesWithMarker(marker, "sleep").size() == 3; }, 120s));
  launcher.signal(SIGINT);
  EXPECT_EQ(exitCodeBy(launcher, std::chrono::steady_clock::now() + 20s), 128 + SIGINT);
  // The user's own stop is one line saying where the run was, not a failure of the ranks.
  const std::string err = readFile(dir.path() + "/err");
  EXPECT_NE(err.find("ddp-sim launch: interrupted by SIGINT: stopped 3 ranks at "), std::string::npos)
      << err;
  EXPECT_EQ(err.find("error"), std::string::npos) << err;
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 5s).empty());
}

TEST(Launch, KilledLauncherLeavesNoOrphan) {
  TempDir dir;
  const auto marker = uniqueMarker();
  ChildProcess launcher(launch({"-n", "3"}, {"/bin/sleep", "60"}), 
                        childOptions({{kMarkerVariable, marker}}, dir.path() + "/out", dir.path() + "/err"));
  ASSERT_TRUE(eventually([&] { return processesWithMarker(marker, "sleep").size() == 3; }, 120s));
  launcher.signal(SIGKILL);  // no chance to clean up: PR_SET_PDEATHSIG must do it
  EXPECT_EQ(exitCodeBy(launcher, std::chrono::steady_clock::now() + 10s), 128 + SIGKILL);
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 5s).empty());
}

// The scenario rank program, exec'd per rank under the launcher and joined through env://.
TEST(Launch, ScenarioRanksUnderTheLauncher) {
  const auto healthy = runCommand(launch({"-n", "3", "--timeout", "60"},
                                         {kSim, "rank-run", "healthy"}), 90s);
  EXPECT_EQ(healthy.exitCode, 0) << healthy.out << healthy.err;
  EXPECT_NE(healthy.out.find("[rank0]: rank 0: "), std::string::npos) << healthy.out;
  const auto uneven = runCommand(launch({"-n", "4", "--timeout", "60"},
                                        {kSim, "rank-run", "uneven-batches-hang"}), 90s);
  EXPECT_EQ(uneven.exitCode, 1) << uneven.out << uneven.err;
  EXPECT_NE(uneven.out.find("[rank0]: FAIL collective-mismatch at epoch 0 step 25 on ranks 2, 3"),
            std::string::npos)
      << uneven.out;
  EXPECT_NE(uneven.err.find("rank 0 (pid"), std::string::npos) << uneven.err;
  const auto marker = uniqueMarker();
  const auto crash = runCommand(launch({"-n", "4", "--timeout", "60"},
                                       {kSim, "rank-run", "rank-crash"}), 90s, marker);
  EXPECT_EQ(crash.exitCode, 1) << crash.out << crash.err;
  EXPECT_NE(crash.err.find("rank 2 (pid"), std::string::npos) << crash.err;
  EXPECT_NE(crash.err.find("killed by signal 9 (SIGKILL)"), std::string::npos) << crash.err;
  EXPECT_TRUE(waitNoProcessesWithMarker(marker, 5s).empty());
}

TEST(Launch, UnknownCommandIsAUsageError) {
  const auto r = runCommand(launch({"-n", "2"}, {"no-such-program-ddph"}), 30s);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("cannot run 'no-such-program-ddph'"), std::string::npos) << r.err;
}

// --- checked before any rank starts: one line, exit 2, no rank forked ----------------------------

// A rank that starts leaves this file behind; none may.
std::vector<std::string> touching(const std::string& file) {
  return {"/bin/sh", "-c", "touch '" + file + "'"};
}

TEST(Launch, AWorldBeyondTheMachineIsRefusedBeforeAnyRankStarts) {
  TempDir dir;
  const std::string started = dir.path() + "/started";
  const auto huge = runCommand(launch({"-n", "100000"}, touching(started)), 60s);
  EXPECT_EQ(huge.exitCode, 2) << huge.err;
  EXPECT_NE(huge.err.find("-n 100000 is above the launcher's limit of 2048 ranks"), std::string::npos)
      << huge.err;
  EXPECT_EQ(std::count(huge.err.begin(), huge.err.end(), '\n'), 1) << huge.err;
  // A Python world: each ordered pair of ranks binds a port of the ephemeral range on 127.0.0.1.
  const auto python = runCommand(launch({"-n", "1000"}, {"/usr/bin/python3", "-c", "pass"}), 60s);
  EXPECT_EQ(python.exitCode, 2) << python.err;
  EXPECT_NE(python.err.find("the most Python ranks whose Gloo can connect on this machine"),
            std::string::npos)
      << python.err;
  EXPECT_NE(python.err.find("ip_local_port_range"), std::string::npos) << python.err;
  EXPECT_FALSE(std::ifstream(started).good()) << "a rank started";
}

TEST(Launch, AReportThatCannotBeWrittenIsRefusedBeforeAnyRankStarts) {
  TempDir dir;
  const std::string started = dir.path() + "/started";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--audit", "--report", dir.path() + "/no-such-folder/r.json"},
       "cannot write the JSON report to '" + dir.path() + "/no-such-folder/r.json': no folder"},
      {{"--audit", "--html", dir.path()}, "cannot write the HTML report to '" + dir.path() +
                                              "': it is a folder"},
      {{"--audit", "--trace-dir", started + ".file/traces"},
       "cannot write the trace to '" + started + ".file/traces': '" + started + ".file' is not a folder"}};
  std::ofstream(started + ".file") << "x";
  for (const auto& [extra, expected] : cases) {
    std::vector<std::string> options = {"-n", "2"};
    options.insert(options.end(), extra.begin(), extra.end());
    const auto r = runCommand(launch(options, touching(started)), 60s);
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("ddp-sim: error: " + expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::ifstream(started).good()) << "a rank started";
  }
}

TEST(Launch, AScriptThatDoesNotCompileIsRefusedWithItsLine) {
  TempDir dir;
  const std::string script = dir.path() + "/train.py";
  std::ofstream(script) << "import os\nopen(os.environ['STARTED'], 'w')\ndef main(:\n    pass\n";
  const std::string started = dir.path() + "/started";
  const auto r = runCommand(launch({"-n", "2"}, {"/usr/bin/python3", script}), 60s, "",
                            {{"STARTED", started}});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("the program's script does not compile: " + script + ":3: SyntaxError"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::ifstream(started).good()) << "a rank started";
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/__pycache__")) << "a .pyc was written";
}

TEST(Launch, AMistypedOptionOrSubcommandIsNamed) {
  const auto option = runCommand({kSim, "launch", "-n", "2", "--audti", "--", "true"}, 60s);
  EXPECT_EQ(option.exitCode, 2);
  EXPECT_EQ(option.err, "ddp-sim: error: unknown option '--audti'; did you mean '--audit'?\n");
  const auto far = runCommand({kSim, "launch", "-n", "2", "--zzzzzz", "--", "true"}, 60s);
  EXPECT_EQ(far.exitCode, 2);
  EXPECT_EQ(far.err, "ddp-sim: error: unknown option '--zzzzzz' (ddp-sim launch --help lists the "
                     "options)\n");
  const auto sub = runCommand({kSim, "lauch", "-n", "2"}, 60s);
  EXPECT_EQ(sub.exitCode, 2);
  EXPECT_NE(sub.err.find("ddp-sim: error: unknown subcommand 'lauch'; did you mean 'launch'?"),
            std::string::npos)
      << sub.err;
  const auto none = runCommand({kSim}, 60s);
  EXPECT_EQ(none.exitCode, 2);
  EXPECT_NE(none.err.find("ddp-sim: error: no subcommand given; the subcommands: "), std::string::npos)
      << none.err;
}

// One help style: every subcommand's --help ends with "Exit codes: 0 …, 1 …, 2 …, 3 …" (the
// commands that stop on a signal add 128+N), and a token that is no subcommand is named with the
// list of them.
TEST(Launch, EveryHelpEndsWithItsExitCodes) {
  for (const std::string sub : {"", "sampler", "check-sampler", "launch", "run", "scenarios", "audit",
                                "rank-run"}) {
    std::vector<std::string> argv{kSim};
    if (!sub.empty()) argv.push_back(sub);
    argv.emplace_back("--help");
    const auto r = runCommand(argv, 60s);
    EXPECT_EQ(r.exitCode, 0) << sub << ": " << r.err;
    std::string help = r.out;  // CLI11 wraps the footer: read it as one line
    std::replace(help.begin(), help.end(), '\n', ' ');
    const auto at = help.find("Exit codes: 0 ");
    ASSERT_NE(at, std::string::npos) << sub << ":\n" << r.out;
    for (const char* code : {", 1 ", ", 2 ", ", 3 "}) {
      EXPECT_NE(help.find(code, at), std::string::npos) << sub << " has no exit code" << code << ":\n" << r.out;
    }
    if (sub == "launch" || sub == "run") {
      EXPECT_NE(help.find(", 128+N interrupted by signal N", at), std::string::npos) << r.out;
    }
  }
  const auto unknown = runCommand({kSim, "frobnicate", "-n", "2"}, 60s);
  EXPECT_EQ(unknown.exitCode, 2);
  EXPECT_EQ(unknown.err, "ddp-sim: error: unknown subcommand 'frobnicate' (the subcommands: sampler, "
                         "check-sampler, launch, rank-run, run, scenarios, audit)\n");
}

// The audit's report folder goes away during the run (the program removes it): the verdict is
// printed all the same, the one line names the file, and the exit code is 3.
TEST(Launch, AReportLostAtTheEndCostsTheFileNotTheVerdict) {
  TempDir dir;
  const std::string folder = dir.path() + "/reports";
  std::filesystem::create_directory(folder);
  const auto r = runCommand(
      launch({"-n", "2", "--audit", "--report", folder + "/r.json"},
             {"/usr/bin/python3", "-c",
              "import os, shutil, torch.distributed as dist\n"
              "dist.init_process_group('gloo')\n"
              "if dist.get_rank() == 0: shutil.rmtree(os.environ['REPORTS'])\n"
              "dist.barrier()\n"
              "dist.destroy_process_group()\n"}),
      300s, "", {{"REPORTS", folder}});
  EXPECT_EQ(r.exitCode, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("(2 of 2 ranks traced): PASSED"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("ddp-sim launch: error: cannot write '" + folder + "/r.json'"),
            std::string::npos)
      << r.err;
}

// Every ddp-sim timeout is a finite number of seconds, at most a week (isSaneTimeout): inf, NaN or
// 1e300 would reach a conversion to integral milliseconds (undefined behaviour).
TEST(Launch, TimeoutsArePositiveFiniteAndAtMostAWeek) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{kSim, "launch", "-n", "2", "--timeout", "inf", "--", "true"}, "--timeout"},
      {{kSim, "launch", "-n", "2", "--grace", "-1", "--", "true"}, "--grace"},
      {{kSim, "run", "healthy", "--timeout", "1e300"}, "--timeout"},
      {{kSim, "check-sampler", "--builtin", "pytorch", "--timeout", "nan"}, "--timeout"},
      {{kSim, "check-sampler", "--builtin", "pytorch", "--startup-timeout", "604801"},
       "--startup-timeout"}};
  for (const auto& [argv, option] : cases) {
    const auto r = runCommand(argv, 60s);
    EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("ddp-sim: error: " + option +
                         " must be positive and at most 604800 s (a week), got "),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Compatibility with torchrun's contract: unmodified PyTorch env:// ranks join under ddp-sim launch.
TEST(Launch, PythonTorchRanksInitWithEnv) {
  if (std::string(DDPH_PYTHON).empty()) GTEST_SKIP() << "no Python that imports torch";
  const auto r = runCommand(
      launch({"-n", "2", "--timeout", "120"},
             {DDPH_PYTHON, "-c",
              "import torch, torch.distributed as dist\n"
              "dist.init_process_group('gloo')\n"
              "t = torch.tensor([dist.get_rank() + 1.0]); dist.all_reduce(t)\n"
              "print('python rank', dist.get_rank(), 'sum', int(t.item()))\n"}),
      150s);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("[rank0]: python rank 0 sum 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank1]: python rank 1 sum 3"), std::string::npos) << r.out;
}

// MASTER_PORT comes from outside the kernel's ephemeral range, where no outgoing connection (Gloo's
// pairs of another job) can take it between the launcher's check and rank 0's bind.
TEST(Launch, MasterPortLiesOutsideTheEphemeralRange) {
  const auto [first, last] = launch::ephemeralPortRange();
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int procFirst = 0, procLast = 0;
  ASSERT_TRUE(range >> procFirst >> procLast);
  EXPECT_EQ(first, procFirst);
  EXPECT_EQ(last, procLast);
  for (int i = 0; i < 20; ++i) {
    const int port = launch::findFreePort();
    EXPECT_TRUE(port < first || port > last) << port << " is in [" << first << ", " << last << "]";
    EXPECT_GE(port, 1024);
  }
  const auto r = runCommand(launch({"-n", "2"}, {"/bin/sh", "-c", "echo port=$MASTER_PORT"}), 60s);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto at = r.out.find("[rank0]: port=");
  ASSERT_NE(at, std::string::npos) << r.out;
  const int port = std::stoi(r.out.substr(at + 14));
  EXPECT_TRUE(port < first || port > last) << port;
}

// A port taken before rank 0's store binds it (here: by this test, listening on it as a store
// would): the launcher says so and runs the ranks once more on a new port.
TEST(Launch, APortTakenAtRendezvousIsRetriedOnceOnANewPort) {
  if (std::string(DDPH_PYTHON).empty()) GTEST_SKIP() << "no Python that imports torch";
  const int listener = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  int no = 0;
  ::setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof(any);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&any), &len), 0);
  const std::uint16_t taken = ntohs(any.sin6_port);
  TempDir dir;
  std::ostringstream out, err;
  std::vector<std::string> notes;
  int retries = 0;
  launch::LaunchOptions options;
  options.numRanks = 2;
  options.command = {DDPH_PYTHON, "-c",
                     "import torch.distributed as dist\n"
                     "dist.init_process_group('gloo')\n"
                     "print('joined', dist.get_rank())\n"};
  options.timeout = std::chrono::milliseconds(300000);
  options.masterPort = taken;
  options.retryTakenPort = true;
  options.extraEnv = {{"TMPDIR", dir.path()}};
  options.out = &out;
  options.err = &err;
  options.note = [&](const std::string& line) { notes.push_back(line); };
  options.beforeRetry = [&] { ++retries; };
  const launch::LaunchResult result = launch::launchRanks(options);
  ::close(listener);
  EXPECT_EQ(result.exitCode, 0) << result.summary << err.str();
  EXPECT_NE(result.masterPort, taken);
  EXPECT_EQ(retries, 1);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.back().find("MASTER_PORT " + std::to_string(taken) + " was taken"), std::string::npos)
      << notes.back();
  EXPECT_NE(out.str().find("[rank1]: joined 1"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace ddph::test_support
