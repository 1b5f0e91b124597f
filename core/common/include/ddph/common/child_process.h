#pragma once
// One child process: started from argv (never through a shell) on Boost.Process, with an
// environment, its standard streams wired as asked, a process group of its own (or one it joins),
// and death with its parent. Waits take a deadline; the kill reaches the whole group and reaps.
// Used by the launcher, the line-protocol sampler and the tests (NOTE [Reaping by polling waitpid]).
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddph::common {

/// "SIGKILL", "SIGTERM"; "signal N" for one without a name.
std::string signalName(int signal);

/// How a child process ended.
struct ExitStatus {
  int code = 0;    ///< its exit code, when it exited
  int signal = 0;  ///< the signal that ended it; 0 when it exited

  static ExitStatus fromWaitStatus(int status);
  /// The shell's convention: the exit code, or 128 + the signal.
  int shellCode() const { return signal != 0 ? 128 + signal : code; }
  /// "exited with code 3", "was killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

/// Where one of the child's standard streams goes.
struct StreamTarget {
  enum class Kind { kInherit, kNull, kPipe, kFile, kDescriptor };
  Kind kind = Kind::kInherit;
  std::string path;  ///< kFile: created or truncated, mode 0600
  int fd = -1;       ///< kDescriptor: a copy of it is the child's (this one stays the caller's)

  static StreamTarget inherit() { return {}; }
  static StreamTarget null() { return {Kind::kNull, {}}; }
  /// A pipe; this side's end is handed over by ChildProcess::takePipe.
  static StreamTarget pipe() { return {Kind::kPipe, {}}; }
  static StreamTarget file(std::string path) { return {Kind::kFile, std::move(path)}; }
  /// An open descriptor of the caller's (a socket the child talks over, e.g. the fork server's).
  static StreamTarget descriptor(int fd) { return {Kind::kDescriptor, {}, fd}; }
};

struct ChildOptions {
  /// Added to, or overriding, this process's environment.
  std::map<std::string, std::string> env;
  /// Removed from the child's environment (before `env` is applied).
  std::vector<std::string> unsetEnv;
  StreamTarget in = StreamTarget::null();
  StreamTarget out = StreamTarget::inherit();
  StreamTarget err = StreamTarget::inherit();
  /// 0: the child leads a new process group (a kill then reaches what it starts); else the group
  /// it joins (the launcher's ranks share the first rank's).
  pid_t processGroup = 0;
  /// SIGKILL the child when the thread that started it dies (PR_SET_PDEATHSIG): no orphan
  /// outlives a killed parent.
  bool dieWithParent = true;
};

class ChildProcess {
 public:
  /// Starts argv: argv[0] is a path or a name looked up on PATH. The child's signal mask is
  /// empty and every signal has its default action, whatever this process ignores or blocks.
  /// Throws ConfigError when the program is not found or not executable, Error when it cannot
  /// be started.
  explicit ChildProcess(const std::vector<std::string>& argv, ChildOptions options = {});
  /// Kills the group and reaps the child if it still runs.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The child's pid until it is reaped; -1 afterwards.
  pid_t pid() const { return pid_; }
  /// Its process group (stays valid after the child is reaped, for what it started).
  pid_t processGroup() const { return group_; }
  /// This side of a StreamTarget::pipe() for stream 0, 1 or 2 (close-on-exec), handed over once:
  /// the caller owns it. -1 when that stream is not a pipe or was taken already.
  int takePipe(int stream);

  /// Reaps the child if it has ended, without waiting.
  std::optional<ExitStatus> poll();
  /// Waits until the child ends or `deadline` passes (nullopt: still running).
  std::optional<ExitStatus> waitUntil(std::chrono::steady_clock::time_point deadline);

  /// Sends `signal` to the child alone; nothing once it is reaped.
  void signal(int signal);
  /// Sends `signal` to the child's whole process group.
  void signalGroup(int signal);
  /// SIGKILL to the group, then reaps the child. Idempotent.
  ExitStatus kill();

 private:
  pid_t pid_ = -1;
  pid_t group_ = -1;
  int pipes_[3] = {-1, -1, -1};
  std::optional<ExitStatus> status_;
};

}  // namespace ddph::common
