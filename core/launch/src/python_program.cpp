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

namespace ddph::launch {

using common::ChildOptions;
using common::ChildProcess;
using common::ConfigError;
using common::Error;
using common::StreamTarget;

namespace fs = std::filesystem;

bool isPythonInterpreter(const std::string& program) {
  static const std::regex kPython(R"(python(3(\.[0-9]+)?)?)");
  return std::regex_match(fs::path(program).filename().string(), kPython);
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

bool startsWith(const std::string& a, const char* prefix) { return a.rfind(prefix, 0) == 0; }

// A Python command line read as the interpreter reads it: its options, then what it runs.
struct PythonCommandLine {
  enum class Runs { kNothing, kScript, kModule, kCode, kStdin };
  Runs runs = Runs::kNothing;
  std::vector<std::string> interpreter;  ///< argv[0] and the options before the program
  std::string target;                    ///< the script or the module
  std::size_t argsFrom = 0;              ///< where the program's own arguments begin
  std::string unknownOption;             ///< the first option the fork server does not take
};

PythonCommandLine parsePythonCommand(const std::vector<std::string>& command) {
  PythonCommandLine out;
  out.interpreter = {command[0]};
  for (std::size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "-W" || a == "-X" || a == "--check-hash-based-pycs") {  // the value is no script
      if (i + 1 >= command.size()) return out;
      out.interpreter.push_back(a);
      out.interpreter.push_back(command[++i]);
      continue;
    }
    if (a == "-m" || (startsWith(a, "-m") && a.size() > 2)) {
      out.target = a == "-m" ? (i + 1 < command.size() ? command[++i] : "") : a.substr(2);
      out.runs = out.target.empty() ? PythonCommandLine::Runs::kNothing : PythonCommandLine::Runs::kModule;
      out.argsFrom = i + 1;
      return out;
    }
    if (a == "-" || startsWith(a, "-c")) {
      out.runs = a == "-" ? PythonCommandLine::Runs::kStdin : PythonCommandLine::Runs::kCode;
      return out;
    }
    if (a.empty() || a[0] != '-') {
      out.runs = PythonCommandLine::Runs::kScript;
      out.target = a;
      out.argsFrom = i + 1;
      return out;
    }
    if (!startsWith(a, "-W") && !startsWith(a, "-X") && !isForkableFlag(a) && out.unknownOption.empty())
      out.unknownOption = a;
    out.interpreter.push_back(a);
  }
  return out;
}

}  // namespace

std::optional<std::string> pythonScript(const std::vector<std::string>& command) {
  if (command.empty() || !isPythonInterpreter(command[0])) return std::nullopt;
  const PythonCommandLine line = parsePythonCommand(command);
  if (line.runs != PythonCommandLine::Runs::kScript) return std::nullopt;
  return line.target;
}

std::optional<ForkServerCommand> forkServerCommand(const std::vector<std::string>& command,
                                                   const std::string& serverScript) {
  if (command.empty() || !isPythonInterpreter(command[0])) return std::nullopt;
  const PythonCommandLine line = parsePythonCommand(command);
  ForkServerCommand out;
  using Runs = PythonCommandLine::Runs;
  if (line.runs == Runs::kNothing) out.whyNot = "no script or module to run";
  if (line.runs == Runs::kStdin) out.whyNot = "the program is read from standard input";
  if (line.runs == Runs::kCode) out.whyNot = "the program is given with -c";
  if (!out.whyNot.empty()) return out;
  if (!line.unknownOption.empty()) {
    out.whyNot = fmt::format("the fork server does not take the interpreter option {}", line.unknownOption);
    return out;
  }
  std::error_code ec;
  if (line.runs == Runs::kScript && !fs::is_regular_file(line.target, ec)) {
    out.whyNot = fs::exists(line.target, ec)
                     ? fmt::format("the script {} is a folder or an archive", line.target)
                     : fmt::format("the script {} does not exist", line.target);
    return out;
  }
  out.argv = line.interpreter;
  out.argv.push_back(serverScript);
  out.argv.push_back(line.runs == Runs::kScript ? "--script" : "--module");
  out.argv.push_back(line.target);
  out.argv.insert(out.argv.end(), command.begin() + static_cast<long>(line.argsFrom), command.end());
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

// Compiles a script without running it or writing a .pyc (compile(), not py_compile), exit 3 and
// "FILE:LINE: SyntaxError: MESSAGE" on stdout when it does not compile. Every Python 3 reads it.
constexpr const char* kCompileScript =
    "import sys\n"
    "p = sys.argv[1]\n"
    "try:\n"
    "    src = open(p, 'rb').read()\n"
    "except OSError:\n"
    "    sys.exit(0)\n"
    "try:\n"
    "    compile(src, p, 'exec', dont_inherit=True)\n"
    "except (SyntaxError, ValueError) as e:\n"
    "    line = getattr(e, 'lineno', None)\n"
    "    where = '%s:%s' % (p, line) if line else p\n"
    "    msg = getattr(e, 'msg', None) or str(e)\n"
    "    sys.stdout.write(('%s: %s: %s' % (where, type(e).__name__, msg))[:400])\n"
    "    sys.exit(3)\n";

}  // namespace

std::optional<std::string> scriptCompileError(const std::string& interpreter,
                                              const std::string& script,
                                              std::chrono::milliseconds deadline) {
  ChildOptions options;
  options.out = StreamTarget::pipe();
  options.err = StreamTarget::null();
  try {
    ChildProcess child({interpreter, "-c", kCompileScript, script}, options);
    const int out = child.takePipe(1);
    const auto status = child.waitUntil(std::chrono::steady_clock::now() + deadline);
    std::string text;
    if (status && status->signal == 0 && status->code == 3) {
      char buf[512];
      for (ssize_t n; (n = ::read(out, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(out);
    if (!text.empty()) return text;
  } catch (const Error&) {
  }
  return std::nullopt;  // compiles, or the interpreter did not answer: the ranks will tell
}

void checkPythonProgram(const std::vector<std::string>& command, bool needsTorch) {
  if (command.empty() || !isPythonInterpreter(command[0])) return;
  if (const auto script = pythonScript(command)) {
    std::error_code ec;
    DDPH_CHECK(fs::exists(*script, ec), "the program's script {} does not exist (in {})", *script,
               fs::current_path(ec).string());
    if (fs::is_regular_file(*script, ec)) {
      const auto error = scriptCompileError(command[0], *script, std::chrono::seconds(30));
      DDPH_CHECK(!error, "the program's script does not compile: {}", error.value_or(""));
    }
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

}  // namespace ddph::launch
