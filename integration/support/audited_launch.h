#pragma once
// `ddp-sim launch --audit` of a program, its JSON report read back: what the audit tests share
// (audit_launch_test.cpp, cpu_emulation_test.cpp).

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace ddph::test_support {

struct Audited {
  CommandResult command;
  nlohmann::json report;
};

/// Runs `program` on `world` ranks under `ddp-sim launch --audit` (plus `flags`, e.g. --cpu),
/// its report as JSON. Generous deadlines: CI runs this beside other tests on 2 cores. The
/// ranks' TMPDIR is the test's own folder: what a killed rank leaves there (torch 2.x's own
/// temporary folder, made when torch.distributed loads) goes with it. `marker` (optional) is put
/// in the launcher's environment, for finding what it left running.
inline Audited launchAudited(int world, const std::vector<std::string>& program, int timeoutS = 240,
                             const std::vector<std::string>& flags = {},
                             const std::string& marker = "") {
  TempDir dir("ddph-audit-launch");
  const std::string report = dir.path() + "/report.json";
  std::vector<std::string> argv = {DDPH_DDP_SIM, "launch", "--audit", "--report", report, "-n",
                                   std::to_string(world), "--timeout", std::to_string(timeoutS)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  Audited a;
  a.command =
      runCommand(argv, std::chrono::seconds(timeoutS + 60), marker, {{"TMPDIR", dir.path()}});
  if (std::filesystem::exists(report)) a.report = nlohmann::json::parse(readFile(report));
  return a;
}

/// Everything the run printed and reported, for a failed assertion's message.
inline std::string shown(const Audited& a) {
  return "exit " + std::to_string(a.command.exitCode) + "\n" + a.command.out + a.command.err +
         (a.report.is_null() ? "" : a.report.dump(2));
}

/// The violations of `property` in the report.
inline std::vector<nlohmann::json> violationsOf(const Audited& a, const std::string& property) {
  std::vector<nlohmann::json> out;
  if (!a.report.contains("violations")) return out;
  for (const auto& v : a.report["violations"]) {
    if (v["property"] == property) out.push_back(v);
  }
  return out;
}

/// The one violation of `property`, failing the test unless there is exactly one.
inline nlohmann::json onlyViolation(const Audited& a, const std::string& property) {
  const auto found = violationsOf(a, property);
  if (found.size() != 1) {
    ADD_FAILURE() << "expected one " << property << " violation\n" << shown(a);
    return nlohmann::json::object(
        {{"ranks", nlohmann::json::array()}, {"epoch", -2}, {"detail", ""}, {"likely_cause", ""}});
  }
  return found[0];
}

inline bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

}  // namespace ddph::test_support
