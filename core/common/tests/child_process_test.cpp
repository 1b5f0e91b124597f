// ddph::common::ChildProcess, the one child-process type of the launcher, the line-protocol sampler
// and the tests: real programs (/bin/sh, /bin/cat, /bin/sleep) started from argv.
#include <gtest/gtest.h>

#include <cstdlib>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "ddph/common/child_process.h"
#include "ddph/common/error.h"
#include "test_support.h"

namespace ddph::common {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string readAll(int fd) {
  std::string text;
  char buffer[256];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

TEST(ChildProcess, PipesTheStreamsAndAddsTheEnvironment) {
  ChildOptions options;
  options.env = {{"DDPH_CHILD_TEST", "hello"}};
  options.in = options.out = StreamTarget::pipe();
  ChildProcess child({"/bin/sh", "-c", "read line; echo \"$DDPH_CHILD_TEST $line\"; exit 3"},
                     options);
  const int in = child.takePipe(0);
  ASSERT_GE(in, 0);
  EXPECT_EQ(child.takePipe(0), -1);  // handed over once
  ASSERT_EQ(::write(in, "world\n", 6), 6);
  ::close(in);
  EXPECT_EQ(readAll(child.takePipe(1)), "hello world\n");
  const auto status = child.waitUntil(Clock::now() + 60s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->code, 3);
  EXPECT_EQ(status->describe(), "exited with code 3");
  EXPECT_EQ(child.pid(), -1);
  EXPECT_EQ(std::getenv("DDPH_CHILD_TEST"), nullptr);  // the child's variable, not this process's
}

TEST(ChildProcess, WritesToFilesAndLooksUpThePath) {
  test_support::TempDir dir;
  ChildProcess child({"echo", "from PATH"}, test_support::childOptions({}, dir.path() + "/out"));
  EXPECT_EQ(test_support::exitCodeBy(child, Clock::now() + 60s), 0);
  EXPECT_EQ(test_support::readFile(dir.path() + "/out"), "from PATH\n");
}

TEST(ChildProcess, AMissingProgramIsAOneLineConfigError) {
  try {
    ChildProcess child({"no-such-program-ddph"});
    FAIL() << "started a program that does not exist";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "cannot run 'no-such-program-ddph': not found or not executable");
  }
  EXPECT_THROW(ChildProcess({}), ConfigError);
}

TEST(ChildProcess, TheDeadlinePassesWhileItRunsAndKillReapsIt) {
  ChildProcess child({"/bin/sleep", "600"});
  EXPECT_FALSE(child.waitUntil(Clock::now()));  // still running: nullopt, nothing killed
  EXPECT_GT(child.pid(), 0);
  const ExitStatus status = child.kill();
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_EQ(status.shellCode(), 128 + SIGKILL);
  EXPECT_EQ(status.describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(child.kill().signal, SIGKILL);  // idempotent
}

TEST(ChildProcess, ItsSignalsHaveTheirDefaultActionWhateverTheParentIgnores) {
  // A test runner or nohup may ignore SIGINT; ignored dispositions survive exec unless reset.
  struct sigaction ignore {}, previous{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(::sigaction(SIGINT, &ignore, &previous), 0);
  ChildOptions options;
  options.out = StreamTarget::pipe();
  ChildProcess child({"/bin/sh", "-c", "echo ready; exec /bin/sleep 600 >/dev/null"}, options);
  ::sigaction(SIGINT, &previous, nullptr);
  EXPECT_EQ(readAll(child.takePipe(1)), "ready\n");  // EOF: the shell is at its exec
  child.signal(SIGINT);
  const auto status = child.waitUntil(Clock::now() + 60s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->signal, SIGINT);
}

TEST(ChildProcess, KillReachesWhatTheChildStartedInItsGroup) {
  // The shell starts a grandchild and reports its pid; the kill of the group must take both.
  ChildOptions options;
  options.out = StreamTarget::pipe();
  ChildProcess child({"/bin/sh", "-c", "/bin/sleep 600 & echo $!; wait"}, options);
  const int out = child.takePipe(1);
  std::string line;
  char c;
  while (::read(out, &c, 1) == 1 && c != '\n') line += c;
  ::close(out);
  const pid_t grandchild = std::stoi(line);
  EXPECT_EQ(::getpgid(grandchild), child.processGroup());
  EXPECT_EQ(child.processGroup(), child.pid());  // leads a group of its own
  child.kill();
  EXPECT_TRUE(test_support::processGone(grandchild, 60s));
}

TEST(ChildProcess, JoinsTheGroupItIsGiven) {
  ChildProcess leader({"/bin/sleep", "600"});
  ChildOptions options;
  options.processGroup = leader.processGroup();
  ChildProcess member({"/bin/sleep", "600"}, options);
  EXPECT_EQ(::getpgid(member.pid()), leader.pid());
  leader.signalGroup(SIGTERM);
  const auto status = member.waitUntil(Clock::now() + 60s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->signal, SIGTERM);
}

}  // namespace
}  // namespace ddph::common
