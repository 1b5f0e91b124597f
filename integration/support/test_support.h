#pragma once
// Shared helpers of the integration tests: a private temp dir, running a command with a deadline,
// and scanning the process table for processes a test started (no orphans).
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ddph::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CommandResult {
  int exitCode = -1;  ///< exit code, or 128 + signal
  std::string out;
  std::string err;
  double seconds = 0;
};

/// A marker unique to this test process and call: put it in a child's environment as
/// DDPH_TEST_MARKER and find its descendants with processesWithMarker.
std::string uniqueMarker();

/// Runs argv (argv[0] a path) with `env` added to the environment and DDPH_TEST_MARKER=marker,
/// killing it (and failing the caller's expectations) when it outlives `timeout`.
CommandResult runCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const std::string& marker = "",
                         const std::map<std::string, std::string>& env = {});

/// Starts argv in the background; returns its pid (reap with waitFor).
pid_t startCommand(const std::vector<std::string>& argv, const std::string& marker,
                   const std::string& outPath, const std::string& errPath);
/// Waits for `pid` until `timeout`; returns exit code (128 + signal), or -1 on timeout (then kills).
int waitFor(pid_t pid, std::chrono::milliseconds timeout);

/// Live (non-zombie) processes whose environment holds DDPH_TEST_MARKER=marker, from /proc;
/// with `comm`, only those whose /proc/PID/comm is `comm` (e.g. ranks that exec'd "sleep").
std::vector<pid_t> processesWithMarker(const std::string& marker, const std::string& comm = "");
/// Polls processesWithMarker until it is empty or `timeout` passes; returns what is left.
std::vector<pid_t> waitNoProcessesWithMarker(const std::string& marker,
                                             std::chrono::milliseconds timeout);

std::string readFile(const std::string& path);

}  // namespace ddph::test
