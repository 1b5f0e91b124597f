#pragma once
// Test support for the check-sampler tests: a private temp dir, running a command with a
// deadline (killed and reaped past it), and waiting for a process to be gone.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/io.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
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

/// Runs argv[0] (a path) with the rest as arguments; stdout and stderr captured through files in
/// a private temp dir. Killed and reaped if it runs past `timeout`.
inline RunResult runCommand(const std::vector<std::string>& argv,
                            std::chrono::seconds timeout = std::chrono::seconds(120)) {
  namespace bp = boost::process;
  TempDir dir;
  const auto outPath = dir.path() / "stdout";
  const auto errPath = dir.path() / "stderr";
  RunResult r;
  const auto start = std::chrono::steady_clock::now();
  bp::child child(bp::exe = argv.at(0),
                  bp::args = std::vector<std::string>(argv.begin() + 1, argv.end()),
                  bp::std_out > outPath.string(), bp::std_err > errPath.string(),
                  bp::std_in < "/dev/null");
  if (child.wait_for(timeout)) {
    r.exitCode = child.exit_code();
  } else {
    child.terminate();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.out = readFile(outPath);
  r.err = readFile(errPath);
  return r;
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
