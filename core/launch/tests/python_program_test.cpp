// launch::checkPythonProgram: what `ddp-sim launch` checks before starting W ranks of a Python
// program.
#include "ddph/launch/python_program.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ddph/common/error.h"
#include "test_support.h"

namespace ddph::test_support {

using common::ConfigError;

namespace {

TEST(PythonProgram, InterpretersAreKnownByName) {
  for (const char* p : {"python", "python3", "python3.11", "/usr/bin/python3", "./venv/bin/python"})
    EXPECT_TRUE(launch::isPythonInterpreter(p)) << p;
  for (const char* p : {"ddp-train", "pythonista", "/usr/bin/env", "python3-config", "ipython"})
    EXPECT_FALSE(launch::isPythonInterpreter(p)) << p;
}

TEST(PythonProgram, TheScriptIsTheFirstArgumentThatIsNoOption) {
  EXPECT_EQ(launch::pythonScript({"python3", "train.py", "--epochs", "3"}), "train.py");
  EXPECT_EQ(launch::pythonScript({"python3", "-u", "-W", "ignore", "-X", "dev", "train.py"}),
            "train.py");
  EXPECT_EQ(launch::pythonScript({"python3", "-m", "ddph_audit", "train.py"}), std::nullopt);
  EXPECT_EQ(launch::pythonScript({"python3", "-mtorch.distributed.run", "train.py"}), std::nullopt);
  EXPECT_EQ(launch::pythonScript({"python3", "-c", "print(1)"}), std::nullopt);
  EXPECT_EQ(launch::pythonScript({"python3", "-"}), std::nullopt);
  EXPECT_EQ(launch::pythonScript({"python3"}), std::nullopt);
  EXPECT_EQ(launch::pythonScript({"ddp-train", "train.py"}), std::nullopt);
}

TEST(PythonProgram, TheForkServerRunsTheScriptOrModuleWithTheInterpretersOptions) {
  TempDir dir("ddph-python-program");
  const std::string script = dir.path() + "/train.py";
  std::ofstream(script) << "print(1)\n";
  using Argv = std::vector<std::string>;
  const auto server = launch::forkServerCommand(
      {"python3", "-u", "-W", "ignore", "-Xdev", script, "--lr", "1"}, "fs.py");
  ASSERT_TRUE(server);
  EXPECT_EQ(server->whyNot, "");
  EXPECT_EQ(server->argv, (Argv{"python3", "-u", "-W", "ignore", "-Xdev", "fs.py", "--script", script,
                                "--lr", "1"}));
  const auto module =
      launch::forkServerCommand({"/usr/bin/python3", "-B", "-m", "pkg.train", "-m", "x"}, "fs.py");
  ASSERT_TRUE(module);
  EXPECT_EQ(module->argv, (Argv{"/usr/bin/python3", "-B", "fs.py", "--module", "pkg.train", "-m", "x"}));
  const auto attached = launch::forkServerCommand({"python3", "-mpkg"}, "fs.py");
  ASSERT_TRUE(attached);
  EXPECT_EQ(attached->argv, (Argv{"python3", "fs.py", "--module", "pkg"}));
}

TEST(PythonProgram, WhatTheForkServerCannotRunIsExecdWithTheReason) {
  TempDir dir("ddph-python-program");
  EXPECT_EQ(launch::forkServerCommand({"ddp-train", "--epochs", "1"}, "fs.py"),
            std::nullopt);  // not Python
  const auto code = launch::forkServerCommand({"python3", "-c", "print(1)"}, "fs.py");
  ASSERT_TRUE(code);
  EXPECT_TRUE(code->argv.empty());
  EXPECT_NE(code->whyNot.find("-c"), std::string::npos) << code->whyNot;
  const auto folder =
      launch::forkServerCommand({"python3", dir.path()}, "fs.py");  // a folder's __main__.py
  ASSERT_TRUE(folder);
  EXPECT_NE(folder->whyNot.find("is a folder or an archive"), std::string::npos) << folder->whyNot;
  const auto interactive = launch::forkServerCommand({"python3", "-i", dir.path()}, "fs.py");
  ASSERT_TRUE(interactive);
  EXPECT_NE(interactive->whyNot.find("option -i"), std::string::npos) << interactive->whyNot;
  EXPECT_NE(launch::forkServerCommand({"python3", "-"}, "fs.py")->whyNot.find("standard input"),
            std::string::npos);
}

TEST(PythonProgram, AMissingScriptIsOneLineNamingIt) {
  TempDir dir("ddph-python-program");
  try {
    launch::checkPythonProgram({"python3", dir.path() + "/trian.py"}, /*needsTorch=*/false);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("trian.py does not exist"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  std::ofstream(dir.path() + "/train.py") << "print(1)\n";
  EXPECT_NO_THROW(launch::checkPythonProgram({"python3", dir.path() + "/train.py"}, false));
  EXPECT_NO_THROW(
      launch::checkPythonProgram({"/bin/sh", dir.path() + "/none.sh"}, true));  // not Python
}

TEST(PythonProgram, AnInterpreterWithoutTorchIsNamedWithOneThatHasIt) {
  // A "python3" whose find_spec('torch') answers no (exit 3), first on PATH, as a pyenv shim is.
  TempDir dir("ddph-python-program");
  const std::string fake = dir.path() + "/python3";
  std::ofstream(fake) << "#!/bin/sh\nexit 3\n";
  ASSERT_EQ(::chmod(fake.c_str(), 0700), 0);
  std::ofstream(dir.path() + "/train.py") << "print(1)\n";
  try {
    launch::checkPythonProgram({fake, dir.path() + "/train.py"}, /*needsTorch=*/true);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fake + ") cannot import torch"), std::string::npos) << what;
    // This machine's system Python has torch (DDPH_PYTHON is the one the tests use).
    EXPECT_NE(what.find(" can: run the program with it"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(
      launch::checkPythonProgram({fake, dir.path() + "/train.py"}, /*needsTorch=*/false));
  EXPECT_NO_THROW(launch::checkPythonProgram({DDPH_PYTHON, dir.path() + "/train.py"}, true));
}

TEST(PythonProgram, AScriptThatDoesNotCompileIsOneLineWithItsLine) {
  TempDir dir;
  const std::string script = dir.path() + "/train.py";
  std::ofstream(script) << "import torch\n\nfor x in range(3)\n    print(x)\n";
  try {
    launch::checkPythonProgram({DDPH_PYTHON, script}, /*needsTorch=*/false);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the program's script does not compile: " + script + ":3: SyntaxError: "),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/__pycache__")) << "a .pyc was written";
  std::ofstream(script) << "import torch\nfor x in range(3):\n    print(x)\n";
  EXPECT_NO_THROW(launch::checkPythonProgram({DDPH_PYTHON, script}, /*needsTorch=*/false));
}

}  // namespace
}  // namespace ddph::test_support
