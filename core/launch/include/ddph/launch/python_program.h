#pragma once
// Before starting W ranks of a Python program: can it start at all? A script that does not exist
// or an interpreter without torch would otherwise fail on every rank, and the audit would judge
// a run that never began (docs/ddp-sim.md, "launch").

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddph::launch {

/// Whether `program` names a CPython interpreter ("python3", "/usr/bin/python3.11", "python").
bool isPythonInterpreter(const std::string& program);

/// The script a Python command line runs ("python3 -u train.py --epochs 3" -> "train.py"), or
/// nothing for `-m module`, `-c code`, stdin, or a command that is not a Python interpreter.
std::optional<std::string> pythonScript(const std::vector<std::string>& command);

/// How a fork server runs a Python program's ranks (rank_spawner.h), or why it cannot.
struct ForkServerCommand {
  /// The interpreter and its options, `serverScript`, then `--script PATH` or `--module NAME` and
  /// the program's arguments.
  std::vector<std::string> argv;
  /// Why the ranks must be exec'd instead ("-c code", an interpreter option the server does not
  /// take, a script that is a folder or a zip archive); empty when `argv` is set.
  std::string whyNot;
};

/// The fork server's command line for `command`, or nothing when `command` is not a Python
/// interpreter at all (a C++ rank program: exec'd, nothing to say).
std::optional<ForkServerCommand> forkServerCommand(const std::vector<std::string>& command,
                                                   const std::string& serverScript);

/// "train.py:12: SyntaxError: invalid syntax" when `interpreter` cannot compile `script` (compiled
/// as the interpreter would, without running it or writing a .pyc); nothing when it compiles, or
/// when the interpreter did not answer within `deadline` (then the ranks will tell).
std::optional<std::string> scriptCompileError(const std::string& interpreter,
                                              const std::string& script,
                                              std::chrono::milliseconds deadline);

/// Throws ConfigError (one line) when `command` is a Python program that cannot start: its script
/// does not exist or does not compile (scriptCompileError), or, with `needsTorch` (the audit's recorder, --cpu), its interpreter cannot
/// import torch; the message then names an interpreter on PATH that can, when there is one.
void checkPythonProgram(const std::vector<std::string>& command, bool needsTorch);

}  // namespace ddph::launch
