#include "test_support.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace ddph::test_support {

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

ChildOptions childOptions(const std::map<std::string, std::string>& env,
                          const std::string& outPath, const std::string& errPath) {
  ChildOptions options;
  options.env = env;
  if (!outPath.empty()) options.out = StreamTarget::file(outPath);
  if (!errPath.empty()) options.err = StreamTarget::file(errPath);
  return options;
}

int exitCodeBy(ChildProcess& child, std::chrono::steady_clock::time_point deadline) {
  if (const auto status = child.waitUntil(deadline)) return status->shellCode();
  child.kill();
  return -1;
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

int countLines(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) ++n;
  }
  return n;
}

namespace {

// A command whose stdout and stderr go to files in its own temp dir. Members in this order: the
// child is killed and reaped before its dir is removed.
class CapturedCommand {
 public:
  CapturedCommand(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env)
      : start_(std::chrono::steady_clock::now()),
        child_(argv, childOptions(env, dir_.path() + "/out", dir_.path() + "/err")) {}

  CommandResult finish(std::chrono::steady_clock::time_point deadline) {
    CommandResult r;
    r.exitCode = exitCodeBy(child_, deadline);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    r.out = readFile(dir_.path() + "/out");
    r.err = readFile(dir_.path() + "/err");
    return r;
  }

 private:
  TempDir dir_;
  std::chrono::steady_clock::time_point start_;
  ChildProcess child_;
};

}  // namespace

CommandResult runCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const std::string& marker, const std::map<std::string, std::string>& env) {
  auto withMarker = env;
  if (!marker.empty()) withMarker[kMarkerVariable] = marker;
  CapturedCommand command(argv, withMarker);
  return command.finish(std::chrono::steady_clock::now() + timeout);
}

std::vector<CommandResult> runCommands(const std::vector<std::vector<std::string>>& argvs,
                                       std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<CapturedCommand>> running;
  for (const auto& argv : argvs)
    running.push_back(
        std::make_unique<CapturedCommand>(argv, std::map<std::string, std::string>{}));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<CommandResult> results;
  for (auto& command : running) results.push_back(command->finish(deadline));
  return results;
}

std::vector<pid_t> processesWithMarker(const std::string& marker, const std::string& comm) {
  std::vector<pid_t> found;
  const std::string needle = std::string(kMarkerVariable) + "=" + marker;
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
    const std::string vars = readFile(base + "/environ");
    std::size_t pos = 0;
    while (pos < vars.size()) {
      const std::size_t next = vars.find('\0', pos);
      const std::string var =
          vars.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
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
  std::vector<pid_t> left;
  eventually([&] { return (left = processesWithMarker(marker)).empty(); }, timeout);
  return left;
}

bool eventually(const std::function<bool()>& holds, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!holds()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

bool fileWritten(const std::string& path, std::chrono::milliseconds timeout) {
  return eventually([&] { return !readFile(path).empty(); }, timeout);
}

bool processGone(pid_t pid, std::chrono::milliseconds within) {
  return eventually(
      [pid] {
        if (::kill(pid, 0) != 0) return true;
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string field, comm, state;
        return static_cast<bool>(stat >> field >> comm >> state) && state == "Z";
      },
      within);
}

}  // namespace ddph::test_support
