// checkPythonProgram: a Python command line's script exists and its interpreter imports torch.
#include "ddph/launch/python_program.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include "ddph/common/child_process.h"
#include "ddph/common/error.h"

namespace ddph {
namespace fs = std::filesystem;

bool isPythonInterpreter(const std::string& program) {
  static const std::regex kPython(R"(python(3(\.[0-9]+)?)?)");
  return std::regex_match(fs::path(program).filename().string(), kPython);
}

std::optional<std::string> pythonScript(const std::vector<std::string>& command) {
  if (command.empty() || !isPythonInterpreter(command[0])) return std::nullopt;
  // Interpreter options that take a value (python3 --help): the value is not the script.
  static const std::set<std::string> kWithValue = {"-W", "-X", "--check-hash-based-pycs"};
  for (std::size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "-m" || a == "-c" || a == "-" || a.rfind("-c", 0) == 0 || a.rfind("-m", 0) == 0)
      return std::nullopt;
    if (kWithValue.count(a)) {
      ++i;
      continue;
    }
    if (a.empty() || a[0] != '-') return a;
  }
  return std::nullopt;
}

namespace {

// Interpreter options a forked rank gets from the server, which runs with them: flags, and the
// options that take a value (attached or next).
bool isForkableFlag(const std::string& a) {
  if (a.size() < 2 || a[0] != '-' || a[1] == '-') return false;
  for (std::size_t i = 1; i < a.size(); ++i) {
    if (std::string("bBdEIOPqsSuv").find(a[i]) == std::string::npos) return false;
  }
  return true;
}

}  // namespace

std::optional<ForkServerCommand> forkServerCommand(const std::vector<std::string>& command,
                                                   const std::string& serverScript) {
  if (command.empty() || !isPythonInterpreter(command[0])) return std::nullopt;
  ForkServerCommand out;
  std::vector<std::string> interpreter = {command[0]};
  for (std::size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "-W" || a == "-X" || a == "--check-hash-based-pycs") {
      if (i + 1 >= command.size()) break;
      interpreter.push_back(a);
      interpreter.push_back(command[++i]);
      continue;
    }
    if ((a.rfind("-W", 0) == 0 || a.rfind("-X", 0) == 0) || isForkableFlag(a)) {
      interpreter.push_back(a);
      continue;
    }
    std::vector<std::string> program;
    if (a == "-m" || (a.rfind("-m", 0) == 0 && a.size() > 2)) {
      const std::string module = a == "-m" ? (i + 1 < command.size() ? command[++i] : "") : a.substr(2);
      if (module.empty()) break;
      program = {"--module", module};
    } else if (!a.empty() && a[0] != '-') {
      std::error_code ec;
      if (!fs::is_regular_file(a, ec)) {
        out.whyNot = fs::exists(a, ec) ? fmt::format("the script {} is a folder or an archive", a)
                                       : fmt::format("the script {} does not exist", a);
        return out;
      }
      program = {"--script", a};
    } else if (a == "-" || a.rfind("-c", 0) == 0) {
      out.whyNot = a == "-" ? "the program is read from standard input" : "the program is given with -c";
      return out;
    } else {
      out.whyNot = fmt::format("the fork server does not take the interpreter option {}", a);
      return out;
    }
    out.argv = interpreter;
    out.argv.push_back(serverScript);
    out.argv.insert(out.argv.end(), program.begin(), program.end());
    out.argv.insert(out.argv.end(), command.begin() + static_cast<long>(i) + 1, command.end());
    return out;
  }
  out.whyNot = "no script or module to run";
  return out;
}

namespace {

// The folders of PATH, in order.
std::vector<fs::path> pathDirs() {
  std::vector<fs::path> out;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty()) out.emplace_back(dir);
  }
  return out;
}

// The file `program` runs as: itself when it has a '/', else the first match on PATH.
std::optional<fs::path> onPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return fs::path(program);
  for (const auto& dir : pathDirs()) {
    std::error_code ec;
    const fs::path candidate = dir / program;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// Whether `interpreter` finds torch, without importing it (find_spec: milliseconds). Nothing
// when it did not answer (not a Python after all, or it hung): then the check is skipped.
std::optional<bool> importsTorch(const std::string& interpreter) {
  ChildOptions options;
  options.out = StreamTarget::null();
  options.err = StreamTarget::null();
  try {
    ChildProcess child({interpreter, "-c",
                        "import importlib.util, sys; "
                        "sys.exit(0 if importlib.util.find_spec('torch') else 3)"},
                       options);
    const auto status = child.waitUntil(std::chrono::steady_clock::now() + std::chrono::seconds(30));
    if (!status) return std::nullopt;  // the destructor kills it
    if (status->signal == 0 && status->code == 0) return true;
    if (status->signal == 0 && status->code == 3) return false;
  } catch (const Error&) {
  }
  return std::nullopt;
}

// An interpreter that imports torch: python3 elsewhere on PATH, then the system's.
std::optional<std::string> interpreterWithTorch(const fs::path& without) {
  std::vector<fs::path> candidates;
  for (const auto& dir : pathDirs()) candidates.push_back(dir / "python3");
  candidates.emplace_back("/usr/bin/python3");
  candidates.emplace_back("/usr/local/bin/python3");
  std::set<fs::path> tried;
  std::error_code ec;
  tried.insert(fs::weakly_canonical(without, ec));
  for (const auto& c : candidates) {
    if (!fs::is_regular_file(c, ec) || ::access(c.c_str(), X_OK) != 0) continue;
    if (!tried.insert(fs::weakly_canonical(c, ec)).second) continue;
    if (importsTorch(c.string()).value_or(false)) return c.string();
  }
  return std::nullopt;
}

}  // namespace

void checkPythonProgram(const std::vector<std::string>& command, bool needsTorch) {
  if (command.empty() || !isPythonInterpreter(command[0])) return;
  if (const auto script = pythonScript(command)) {
    std::error_code ec;
    DDPH_CHECK(fs::exists(*script, ec), "the program's script {} does not exist (in {})", *script,
               fs::current_path(ec).string());
  }
  if (!needsTorch) return;
  const auto interpreter = onPath(command[0]);
  if (!interpreter || importsTorch(interpreter->string()).value_or(true)) return;
  const auto other = interpreterWithTorch(*interpreter);
  throw ConfigError(fmt::format(
      "{} ({}) cannot import torch, which the program's ranks need{}", command[0],
      interpreter->string(),
      other ? fmt::format("; {} can: run the program with it (-- {} …)", *other, *other)
            : std::string("; no python3 on PATH can (install torch: python3-torch on Debian)")));
}

}  // namespace ddph
