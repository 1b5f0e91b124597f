#include "test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
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

extern char** environ;

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

namespace {

// The spawn attributes and file actions, destroyed on every path out of the constructor.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

int decodeStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env,
                           const std::string& outPath, const std::string& errPath) {
  if (argv.empty()) throw std::invalid_argument("ChildProcess: empty argv");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  // This environment, with `env` overriding or added.
  std::vector<std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string var = *e;
    if (env.count(var.substr(0, var.find('='))) == 0) vars.push_back(var);
  }
  for (const auto& [key, value] : env) vars.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);

  SpawnSetup setup;
  // Default dispositions and an empty mask: a test runner that ignores or blocks SIGINT must not
  // make the child immune to the signals the tests send it.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  if (!outPath.empty()) {
    posix_spawn_file_actions_addopen(&setup.actions, 1, outPath.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  if (!errPath.empty()) {
    posix_spawn_file_actions_addopen(&setup.actions, 2, errPath.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  const int rc =
      ::posix_spawn(&pid_, args[0], &setup.actions, &setup.attr, args.data(), envp.data());
  if (rc != 0) {
    pid_ = -1;
    throw std::system_error(rc, std::generic_category(), "posix_spawn " + argv[0]);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) killAndReap();
}

void ChildProcess::sendSignal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

void ChildProcess::killAndReap() {
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

int ChildProcess::wait(std::chrono::steady_clock::time_point deadline) {
  // NOTE [Reaping by polling waitpid]: children are reaped by polling waitpid(WNOHANG), never by
  // waiting for a SIGCHLD. Boost.Process 1.74's wait_until waits for a SIGCHLD, which is lost when
  // several children end together (runCommands, rank processes), and then sleeps until the
  // deadline.
  while (!exitCode_) {
    int status = 0;
    const pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      pid_ = -1;
      exitCode_ = decodeStatus(status);
    } else if (got < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "waitpid");
    } else if (std::chrono::steady_clock::now() >= deadline) {
      killAndReap();
      exitCode_ = -1;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return *exitCode_;
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
        child_(argv, env, dir_.path() + "/out", dir_.path() + "/err") {}

  CommandResult finish(std::chrono::steady_clock::time_point deadline) {
    CommandResult r;
    r.exitCode = child_.wait(deadline);
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
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = processesWithMarker(marker);
    if (left.empty() || std::chrono::steady_clock::now() > deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool processGone(pid_t pid, std::chrono::milliseconds within) {
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

}  // namespace ddph::test_support
