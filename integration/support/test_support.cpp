#include "test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddph::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/ddph-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string uniqueMarker() {
  static std::atomic<int> counter{0};
  return "ddph-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t startCommand(const std::vector<std::string>& argv, const std::string& marker,
                   const std::string& outPath, const std::string& errPath) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (!marker.empty()) ::setenv("DDPH_TEST_MARKER", marker.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

int waitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

CommandResult runCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const std::string& marker, const std::map<std::string, std::string>& env) {
  TempDir dir;
  const std::string outPath = dir.path() + "/out";
  const std::string errPath = dir.path() + "/err";
  std::vector<std::string> full;
  if (!env.empty()) {
    full.push_back("/usr/bin/env");
    for (const auto& [k, v] : env) full.push_back(k + "=" + v);
  }
  full.insert(full.end(), argv.begin(), argv.end());
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = startCommand(full, marker, outPath, errPath);
  CommandResult result;
  result.exitCode = waitFor(pid, timeout);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.out = readFile(outPath);
  result.err = readFile(errPath);
  return result;
}

std::vector<pid_t> processesWithMarker(const std::string& marker, const std::string& comm) {
  std::vector<pid_t> found;
  const std::string needle = "DDPH_TEST_MARKER=" + marker;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    const std::string base = std::string("/proc/") + entry->d_name;
    const std::string stat = readFile(base + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') continue;
    if (!comm.empty()) {
      std::string name = readFile(base + "/comm");
      while (!name.empty() && name.back() == '\n') name.pop_back();
      if (name != comm) continue;
    }
    const std::string environ = readFile(base + "/environ");
    std::size_t pos = 0;
    while (pos < environ.size()) {
      const std::size_t next = environ.find('\0', pos);
      const std::string var =
          environ.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
      if (var == needle) {
        found.push_back(static_cast<pid_t>(pid));
        break;
      }
      if (next == std::string::npos) break;
      pos = next + 1;
    }
  }
  ::closedir(proc);
  return found;
}

std::vector<pid_t> waitNoProcessesWithMarker(const std::string& marker,
                                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = processesWithMarker(marker);
    if (left.empty() || std::chrono::steady_clock::now() > deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace ddph::test
