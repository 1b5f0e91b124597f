// parseCommandLine's one line for a command line CLI11 refused: the bad token, and the option or
// subcommand it most likely meant.
#include "ddph/common/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ddph::common {
namespace {

using command_line_detail::closestName;
using command_line_detail::diagnoseCommandLine;
using command_line_detail::editDistance;

TEST(CommandLine, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(editDistance("--audit", "--audit"), 0u);
  EXPECT_EQ(editDistance("--audti", "--audit"), 2u);  // a swap is two substitutions
  EXPECT_EQ(editDistance("--audt", "--audit"), 1u);
  EXPECT_EQ(editDistance("", "abc"), 3u);
}

TEST(CommandLine, TheClosestNameIsOnlyNamedWhenItStandsOut) {
  const std::vector<std::string> names = {"--audit", "--report", "--html", "--cpu", "--gpus"};
  EXPECT_EQ(closestName("--audti", names), "--audit");
  EXPECT_EQ(closestName("--reprot", names), "--report");
  EXPECT_EQ(closestName("--rep", names), "--report");        // the only name it begins
  EXPECT_EQ(closestName("--zzzzzz", names), std::nullopt);   // nothing near
  EXPECT_EQ(closestName("--xpu", {"--gpu", "--cpu"}), std::nullopt);  // two alike: a tie
  EXPECT_EQ(closestName("--gpu", {"--gpus", "--cpu"}), "--gpus");    // the prefix breaks it
  EXPECT_EQ(closestName("lauch", {"launch", "run", "audit"}), "launch");
}

// argv as main() gets it.
struct Argv {
  explicit Argv(std::vector<std::string> args) : args_(std::move(args)) {
    for (auto& a : args_) pointers_.push_back(a.data());
  }
  int argc() const { return static_cast<int>(pointers_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

std::optional<std::string> diagnose(std::vector<std::string> args) {
  CLI::App app("tool");
  app.require_subcommand(1);
  CLI::App* launch = app.add_subcommand("launch", "start ranks")->group("Commands");
  int n = 0;
  bool audit = false;
  std::vector<std::string> command;
  launch->add_option("-n,--nproc", n, "ranks");
  launch->add_flag("--audit", audit, "audit");
  launch->add_option("command", command, "the program");
  app.add_subcommand("run", "run a scenario")->group("Commands");
  app.add_subcommand("rank-run", "a test helper")->group("");
  Argv argv(std::move(args));
  return diagnoseCommandLine(app, argv.argc(), argv.argv(), "tool");
}

TEST(CommandLine, TheBadTokenIsNamed) {
  EXPECT_EQ(diagnose({"tool", "launch", "-n", "2", "--audti", "--", "x"}),
            "unknown option '--audti'; did you mean '--audit'?");
  EXPECT_EQ(diagnose({"tool", "launch", "-n", "2", "--wat"}),
            "unknown option '--wat' (tool launch --help lists the options)");
  EXPECT_EQ(diagnose({"tool", "launch", "-n", "2", "x", "--wat"}),
            "unknown option '--wat' (tool launch --help lists the options; a program's own "
            "arguments go after --)");
  EXPECT_EQ(diagnose({"tool", "lauch"}),
            "unknown subcommand 'lauch'; did you mean 'launch'? (the subcommands: launch, run)");
  EXPECT_EQ(diagnose({"tool"}),
            "no subcommand given; the subcommands: launch, run (tool --help says what each does)");
  // What follows -- is the program's; an option's value is not an option; -2 is a number.
  EXPECT_EQ(diagnose({"tool", "launch", "-n", "2", "--", "x", "--wat"}), std::nullopt);
  EXPECT_EQ(diagnose({"tool", "launch", "-n", "-2"}), std::nullopt);
}

}  // namespace
}  // namespace ddph::common
