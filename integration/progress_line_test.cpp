// ddp-sim's progress line (ddph/common/progress_line.h) on a real pseudo-terminal: the real
// ddp-sim binary runs on the slave side of openpty (forkpty) and the test reads the master side.
// On the terminal the progress text appears, redrawn with '\r' and cleared at the end, and the
// ranks' output lines never share a row with it; with pipes (a log, CI) stderr has none of it.
// No wall-clock bounds and no sleeps: every wait is for an event, under a generous deadline.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "test_support.h"

namespace ddph::test_support {
namespace {

const std::string kSim = DDPH_DDP_SIM;
constexpr auto kDeadline = std::chrono::minutes(5);

struct TerminalRun {
  int exitCode = -1;  ///< exit code, 128 + signal, or -1: killed at the deadline
  std::string screen;  ///< every byte the program wrote to its terminal
};

// Runs argv on a new pseudo-terminal (its stdin, stdout and stderr) until it exits; `onScreen`
// sees the screen so far after each read (a test acts on what it saw).
TerminalRun runOnTerminal(const std::vector<std::string>& argv,
                          const std::function<void(const std::string&)>& onScreen = {}) {
  winsize size{};
  size.ws_row = 40;
  size.ws_col = 200;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
  if (pid < 0) throw std::runtime_error("forkpty failed");
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  TerminalRun run;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  char buffer[4096];
  for (;;) {  // until the slave side is closed by every process holding it (EIO on Linux)
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    run.screen.append(buffer, static_cast<std::size_t>(n));
    if (onScreen) onScreen(run.screen);
  }
  int status = 0;
  if (std::chrono::steady_clock::now() >= deadline) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ::close(master);
    return run;
  }
  ::waitpid(pid, &status, 0);
  ::close(master);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The first drawing of a progress line: '\r', `text`, an elapsed time (whatever it is), clear to
// the end of the row. It is drawn before anything runs, so its counts are known.
bool drawn(const std::string& screen, const std::string& text) {
  const std::regex line("\r" + std::regex_replace(text, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                        R"(\d+:\d\d(:\d\d)?\x1b\[K)");
  return std::regex_search(screen, line);
}

// `what` occurs, and the bytes just before every occurrence are a line start ('\n') or a cleared row.
bool alwaysOnItsOwnRow(const std::string& screen, const std::string& what) {
  if (!has(screen, what)) return false;
  for (auto at = screen.find(what); at != std::string::npos; at = screen.find(what, at + 1)) {
    const bool lineStart = at == 0 || screen[at - 1] == '\n';
    const bool clearedRow = at >= 4 && screen.compare(at - 4, 4, "\r\x1b[K") == 0;
    if (!lineStart && !clearedRow) return false;
  }
  return true;
}

TEST(ProgressLine, RunShowsRanksJoinedAndEpochsOnATerminalAndNothingInAPipe) {
  const std::vector<std::string> argv = {kSim, "run", "healthy", "-n", "2"};
  const TerminalRun tty = runOnTerminal(argv);
  ASSERT_EQ(tty.exitCode, 0) << tty.screen;
  EXPECT_TRUE(drawn(tty.screen, "ddp-sim run healthy: 0 of 2 ranks joined, 0 of 2 epochs done, ")) << tty.screen;
  EXPECT_TRUE(has(tty.screen, "\r\x1b[K")) << tty.screen;  // cleared at the end
  EXPECT_TRUE(alwaysOnItsOwnRow(tty.screen, "scenario healthy (built-in:healthy) on 2 rank processes: PASSED")) << tty.screen;

  const CommandResult piped = runCommand(argv, kDeadline);
  ASSERT_EQ(piped.exitCode, 0) << piped.err;
  EXPECT_FALSE(has(piped.err, "ranks joined")) << piped.err;
  EXPECT_FALSE(has(piped.err, "\r")) << piped.err;
  EXPECT_FALSE(has(piped.out, "ranks joined")) << piped.out;
}

TEST(ProgressLine, LaunchKeepsTheRanksLinesOffTheProgressRow) {
  const std::vector<std::string> argv = {kSim, "launch", "-n", "2", "--", kSim, "rank-selftest"};
  const TerminalRun tty = runOnTerminal(argv);
  ASSERT_EQ(tty.exitCode, 0) << tty.screen;
  EXPECT_TRUE(drawn(tty.screen, "ddp-sim launch: 0 of 2 ranks running, ")) << tty.screen;
  EXPECT_TRUE(has(tty.screen, "[rank0]: rank 0 of 2: allreduce sum 3")) << tty.screen;
  EXPECT_TRUE(alwaysOnItsOwnRow(tty.screen, "[rank")) << tty.screen;
  EXPECT_TRUE(alwaysOnItsOwnRow(tty.screen, "ddp-sim launch: all 2 ranks exited")) << tty.screen;

  const CommandResult piped = runCommand(argv, kDeadline);
  ASSERT_EQ(piped.exitCode, 0) << piped.err;
  EXPECT_FALSE(has(piped.err, "ranks running")) << piped.err;
  EXPECT_FALSE(has(piped.err, "\r")) << piped.err;
  EXPECT_TRUE(has(piped.out, "[rank1]: rank 1 of 2: allreduce sum 3")) << piped.out;
}

TEST(ProgressLine, LaunchWithAuditCountsJoinedRanksAndEpochsFromTheTraces) {
  const TerminalRun tty = runOnTerminal({kSim, "launch", "-n", "2", "--audit", "--", kSim, "rank-run", "healthy"});
  ASSERT_EQ(tty.exitCode, 0) << tty.screen;
  EXPECT_TRUE(drawn(tty.screen, "ddp-sim launch: 0 of 2 ranks running, 0 joined, 0 epochs done, ")) << tty.screen;
  EXPECT_TRUE(alwaysOnItsOwnRow(tty.screen, "[rank0]: rank 0:")) << tty.screen;
}

// A Python program's ranks are forked by the fork server, so they are its children, not the
// launcher's: the count is the launcher's own (started, not yet reaped). The ranks stay alive until
// the line has shown both running.
TEST(ProgressLine, LaunchCountsForkedRanksWhileTheyRun) {
  if (std::string(DDPH_PYTHON).empty()) GTEST_SKIP() << "no Python that imports torch";
  TempDir dir;
  const std::string flag = dir.path() + "/seen";
  const std::string program = std::string(DDPH_AUDIT_PROGRAMS_DIR) + "/../launch_programs/wait_for_file.py";
  bool seen = false;
  const TerminalRun tty = runOnTerminal(
      {kSim, "launch", "-n", "2", "--", DDPH_PYTHON, program, flag}, [&](const std::string& screen) {
        if (!seen && has(screen, "ddp-sim launch: 2 of 2 ranks running, ")) {
          seen = true;
          std::ofstream(flag) << "seen\n";
        }
      });
  ASSERT_EQ(tty.exitCode, 0) << tty.screen;
  EXPECT_TRUE(seen) << tty.screen;
  EXPECT_FALSE(has(tty.screen, "each rank execs the program")) << tty.screen;  // forked, not exec'd
  EXPECT_TRUE(alwaysOnItsOwnRow(tty.screen, "ddp-sim launch: all 2 ranks exited")) << tty.screen;
}

TEST(ProgressLine, CheckSamplerShowsThePropertySearched) {
  const std::vector<std::string> argv = {kSim, "check-sampler", "--builtin", "libtorch-sequential"};
  const TerminalRun tty = runOnTerminal(argv);
  ASSERT_EQ(tty.exitCode, 1) << tty.screen;
  EXPECT_TRUE(has(tty.screen, "\rddp-sim check-sampler: property 1 of ")) << tty.screen;
  EXPECT_TRUE(alwaysOnItsOwnRow(tty.screen, "  FAIL reshuffle")) << tty.screen;
  EXPECT_TRUE(alwaysOnItsOwnRow(tty.screen, "  ok   ")) << tty.screen;

  const CommandResult piped = runCommand(argv, kDeadline);
  ASSERT_EQ(piped.exitCode, 1) << piped.err;
  EXPECT_FALSE(has(piped.err, "property 1 of")) << piped.err;
  EXPECT_FALSE(has(piped.err, "\r")) << piped.err;
}

}  // namespace
}  // namespace ddph::test_support
