#include "test_support.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace ddph::test_support {

using common::ChildOptions;
using common::ChildProcess;
using common::StreamTarget;

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

namespace {

// The socket inodes process `pid` holds ("socket:[123]" links in /proc/PID/fd).
std::set<std::string> socketInodes(pid_t pid) {
  std::set<std::string> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code linkError;
    const std::string target = std::filesystem::read_symlink(entry.path(), linkError).string();
    if (!linkError && target.rfind("socket:[", 0) == 0) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  return inodes;
}

std::uint8_t hexByte(const std::string& hex, std::size_t at) {
  return static_cast<std::uint8_t>(std::stoul(hex.substr(at, 2), nullptr, 16));
}

// "0100007F:8B23" (tcp: one little-endian word) or 32 hex digits (tcp6: four of them), port.
Listener decodeAddress(const std::string& field) {
  const auto colon = field.find(':');
  const std::string ip = field.substr(0, colon);
  const unsigned port = static_cast<unsigned>(std::stoul(field.substr(colon + 1), nullptr, 16));
  std::vector<std::uint8_t> bytes;
  for (std::size_t word = 0; word < ip.size() / 8; ++word) {
    for (int j = 3; j >= 0; --j) bytes.push_back(hexByte(ip, word * 8 + static_cast<std::size_t>(j) * 2));
  }
  Listener l;
  if (bytes.size() == 4) {
    l.address = std::to_string(bytes[0]) + "." + std::to_string(bytes[1]) + "." +
                std::to_string(bytes[2]) + "." + std::to_string(bytes[3]) + ":" + std::to_string(port);
    l.loopback = bytes[0] == 127;
    return l;
  }
  const bool zeroHead = std::all_of(bytes.begin(), bytes.begin() + 10, [](auto b) { return b == 0; });
  const bool v4Mapped = zeroHead && bytes[10] == 0xff && bytes[11] == 0xff;
  const bool one = zeroHead && bytes[10] == 0 && bytes[11] == 0 && bytes[12] == 0 && bytes[13] == 0 &&
                   bytes[14] == 0 && bytes[15] == 1;
  l.loopback = one || (v4Mapped && bytes[12] == 127);
  std::ostringstream text;
  text << "[" << std::hex;
  for (std::size_t k = 0; k < 16; k += 2) text << (k ? ":" : "") << (bytes[k] << 8 | bytes[k + 1]);
  text << std::dec << "]:" << port;
  l.address = text.str();
  return l;
}

}  // namespace

std::vector<Listener> listeningSockets(const std::vector<pid_t>& pids) {
  std::set<std::string> inodes;
  for (pid_t pid : pids) {
    for (auto& inode : socketInodes(pid)) inodes.insert(inode);
  }
  std::vector<Listener> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(readFile(table));
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::vector<std::string> f;
      for (std::string x; fields >> x;) f.push_back(x);
      if (f.size() < 10 || f[3] != "0A" || inodes.count(f[9]) == 0) continue;  // 0A: LISTEN
      found.push_back(decodeAddress(f[1]));
    }
  }
  return found;
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
