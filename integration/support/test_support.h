#pragma once
// Test and benchmark support (not part of the ddph package; target ddph_test_support): a private
// temp dir, children on ddph::common::ChildProcess (every wait has a deadline; whatever still runs
// when the child object goes away is killed and reaped, so a failed ASSERT leaves no orphan),
// running commands with their output captured, and scanning the process table for processes a test
// started.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ddph/common/child_process.h"
#include "ddph/common/private_folder.h"

namespace ddph::test_support {

/// The environment variable that marks a test's children (see processesWithMarker).
inline constexpr const char* kMarkerVariable = "DDPH_TEST_MARKER";

/// A fresh directory `<prefix>-XXXXXX` under $TMPDIR (or /tmp), removed with everything in it on
/// destruction (no leftovers, unique per run): the harness's own PrivateFolder.
class TempDir : public common::PrivateFolder {
 public:
  explicit TempDir(const std::string& prefix = "ddph-test") : common::PrivateFolder(prefix + "-") {}
};

/// A test's child (ddph::common::ChildProcess): `env` added to this process's environment, stdout
/// and stderr to `outPath` and `errPath` (created or truncated) or, when empty, inherited.
common::ChildOptions childOptions(const std::map<std::string, std::string>& env = {},
                                  const std::string& outPath = "", const std::string& errPath = "");

/// Waits for `child` until `deadline`: its exit code, 128 + the signal that ended it, or -1 when
/// the deadline passed (it is then killed and reaped).
int exitCodeBy(common::ChildProcess& child, std::chrono::steady_clock::time_point deadline);

struct CommandResult {
  int exitCode = -1;  ///< exit code, 128 + signal, or -1: killed at the deadline
  std::string out;
  std::string err;
  double seconds = 0;
};

/// A marker unique to this test process and call: put it in a child's environment as
/// kMarkerVariable (runCommand's `marker`) and find its descendants with processesWithMarker.
std::string uniqueMarker();

/// Runs argv (argv[0] a path) to completion with stdout and stderr captured, `env` added to the
/// environment and, when `marker` is set, kMarkerVariable=marker. Killed and reaped when it
/// outlives `timeout` (exitCode -1).
CommandResult runCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const std::string& marker = "",
                         const std::map<std::string, std::string>& env = {});

/// Runs the commands at the same time (each start of a LibTorch-linked tool loads the same
/// libraries: concurrently they share one read of them) under one deadline; results in order.
std::vector<CommandResult> runCommands(const std::vector<std::vector<std::string>>& argvs,
                                       std::chrono::milliseconds timeout);

/// Live (non-zombie) processes whose environment holds kMarkerVariable=marker, from /proc;
/// with `comm`, only those whose /proc/PID/comm is `comm` (e.g. ranks that exec'd "sleep").
std::vector<pid_t> processesWithMarker(const std::string& marker, const std::string& comm = "");
/// Polls processesWithMarker until it is empty or `timeout` passes; returns what is left.
std::vector<pid_t> waitNoProcessesWithMarker(const std::string& marker,
                                             std::chrono::milliseconds timeout);
/// Polls `holds` every 20 ms until it is true (returns true) or `timeout` passes (returns
/// false): how a test waits for a file, a process or a line without ordering events by time.
bool eventually(const std::function<bool()>& holds, std::chrono::milliseconds timeout);
/// True once `path` exists and is not empty (a pid file, a marker a child wrote), within `timeout`.
bool fileWritten(const std::string& path, std::chrono::milliseconds timeout);

/// True once `pid` no longer exists or is a zombie (e.g. a grandchild nobody reaps), waiting up
/// to `within`.
bool processGone(pid_t pid, std::chrono::milliseconds within = std::chrono::seconds(60));

/// The TCP sockets in LISTEN state that the processes `pids` hold, from /proc/PID/fd and
/// /proc/net/tcp, tcp6: "127.0.0.1:41234", "[::]:35619", … with whether each is loopback only.
struct Listener {
  std::string address;
  bool loopback = false;
};
std::vector<Listener> listeningSockets(const std::vector<pid_t>& pids);

std::string readFile(const std::string& path);
/// Number of lines in `text` that contain `needle`.
int countLines(const std::string& text, const std::string& needle);

}  // namespace ddph::test_support
