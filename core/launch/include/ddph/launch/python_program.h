#pragma once
// Before starting W ranks of a Python program: can it start at all? A script that does not exist
// or an interpreter without torch would otherwise fail on every rank, and the audit would judge
// a run that never began (docs/ddp-sim.md, "launch").

#include <optional>
#include <string>
#include <vector>

namespace ddph {

/// Whether `program` names a CPython interpreter ("python3", "/usr/bin/python3.11", "python").
bool isPythonInterpreter(const std::string& program);

/// The script a Python command line runs ("python3 -u train.py --epochs 3" -> "train.py"), or
/// nothing for `-m module`, `-c code`, stdin, or a command that is not a Python interpreter.
std::optional<std::string> pythonScript(const std::vector<std::string>& command);

/// Throws ConfigError (one line) when `command` is a Python program that cannot start: its script
/// does not exist, or, with `needsTorch` (the audit's recorder, --cpu), its interpreter cannot
/// import torch; the message then names an interpreter on PATH that can, when there is one.
void checkPythonProgram(const std::vector<std::string>& command, bool needsTorch);

}  // namespace ddph
