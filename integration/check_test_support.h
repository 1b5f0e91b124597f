#pragma once
// Test support for the check-sampler tests: a private temp dir, running a command with a
// deadline (killed and reaped past it), and waiting for a process to be gone.
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/io.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ddph::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/ddph-check-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct RunResult {
  int exitCode = -1;  ///< -1: killed at the deadline
  std::string out;
  std::string err;
  double seconds = 0;
};

/// A command started with stdout and stderr captured through files in a private temp dir.
/// Reaped here with waitpid: Boost.Process 1.74's wait_until waits for a SIGCHLD, which is lost
/// when several children end together, and then sleeps until the deadline.
class RunningCommand {
 public:
  explicit RunningCommand(const std::vector<std::string>& argv)
      : start_(std::chrono::steady_clock::now()) {
    boost::process::child child(
        boost::process::exe = argv.at(0),
        boost::process::args = std::vector<std::string>(argv.begin() + 1, argv.end()),
        boost::process::std_out > (dir_.path() / "stdout").string(),
        boost::process::std_err > (dir_.path() / "stderr").string(),
        boost::process::std_in < "/dev/null");
    pid_ = child.id();
    child.detach();
  }
  ~RunningCommand() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  RunningCommand(const RunningCommand&) = delete;
  RunningCommand& operator=(const RunningCommand&) = delete;

  /// Waits until `deadline` (then kills and reaps it: exit code -1) and collects the output.
  RunResult finish(std::chrono::steady_clock::time_point deadline) {
    RunResult r;
    int status = 0;
    while (true) {
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    r.out = readFile(dir_.path() / "stdout");
    r.err = readFile(dir_.path() / "stderr");
    return r;
  }

 private:
  TempDir dir_;
  std::chrono::steady_clock::time_point start_;
  pid_t pid_ = -1;
};

/// Runs argv[0] (a path) with the rest as arguments. Killed and reaped past `timeout`.
inline RunResult runCommand(const std::vector<std::string>& argv,
                            std::chrono::seconds timeout = std::chrono::seconds(120)) {
  RunningCommand command(argv);
  return command.finish(std::chrono::steady_clock::now() + timeout);
}

/// Runs the commands at the same time (each start of a LibTorch-linked tool loads the same
/// libraries: concurrently they share one read of them) and returns their results in order.
inline std::vector<RunResult> runCommands(const std::vector<std::vector<std::string>>& argvs,
                                          std::chrono::seconds timeout) {
  std::vector<std::unique_ptr<RunningCommand>> running;
  for (const auto& argv : argvs) running.push_back(std::make_unique<RunningCommand>(argv));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<RunResult> results;
  for (auto& command : running) results.push_back(command->finish(deadline));
  return results;
}

/// True once `pid` no longer exists (or is a zombie nobody reaps), waiting up to `within`.
inline bool processGone(pid_t pid, std::chrono::milliseconds within = std::chrono::seconds(3)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (true) {
    if (::kill(pid, 0) != 0) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string field, comm, state;
    if (stat >> field >> comm >> state && state == "Z") return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Number of lines in `text` that contain `needle`.
inline int countLines(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace ddph::test
