// A finding as every report shows it (ddph/sampler/violation_report.h): the FAIL line, then its
// likely cause, notes and help as a compiler prints a diagnostic's notes; the same fields in JSON;
// the catalogue's cause and help once per property, a finding's own every time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddph/sampler/property.h"
#include "ddph/sampler/violation_report.h"

namespace {

using ddph::sampler::Violation;
namespace property = ddph::sampler::property;

Violation withItsOwn() {
  Violation v{std::string(property::kCollectiveMismatch), {2}, 1, 3, "rank 2 has no partner",
              "a per-rank condition skips the step"};
  v.notes = {"the same in 2 epochs"};
  v.help = "decide the skip on every rank together";
  return v;
}

TEST(ViolationReport, AFindingsNotesAndHelpFollowItsCauseInThatOrder) {
  const std::string text = ddph::sampler::violationsText({withItsOwn()}, {}, 8);
  EXPECT_EQ(text,
            "  FAIL collective-mismatch at epoch 1 step 3 on rank 2: rank 2 has no partner\n"
            "       likely cause: a per-rank condition skips the step\n"
            "       note: the same in 2 epochs\n"
            "       help: decide the skip on every rank together\n");
}

TEST(ViolationReport, TheJsonKeepsNotesAndHelpAsFields) {
  const auto j = ddph::sampler::violationJson(withItsOwn());
  EXPECT_EQ(j.at("likely_cause"), "a per-rank condition skips the step");
  EXPECT_EQ(j.at("notes"), std::vector<std::string>{"the same in 2 epochs"});
  EXPECT_EQ(j.at("help"), "decide the skip on every rank together");
  Violation bare = withItsOwn();
  bare.notes.clear();
  bare.help.clear();
  const auto k = ddph::sampler::violationJson(bare);
  EXPECT_FALSE(k.contains("notes"));
  EXPECT_FALSE(k.contains("help")) << "an own cause without help takes no catalogue help";
}

TEST(ViolationReport, TheCataloguesCauseAndHelpAreShownOncePerProperty) {
  const Violation first{std::string(property::kReshuffle), {}, 1, -1, "epoch 1 repeats epoch 0"};
  const Violation second{std::string(property::kReshuffle), {}, 2, -1, "epoch 2 repeats epoch 1"};
  const std::string text = ddph::sampler::violationsText({first, second}, {}, 8);
  const std::string help = ddph::sampler::helpOf(first);
  ASSERT_FALSE(help.empty()) << "the catalogue has a remedy for reshuffle";
  EXPECT_NE(text.find("help: " + help), std::string::npos) << text;
  EXPECT_EQ(text.find("help: "), text.rfind("help: ")) << "shown once:\n" << text;
  EXPECT_EQ(text.find("likely cause: "), text.rfind("likely cause: ")) << text;
}

}  // namespace
