// launch::checkWorldSize: the worlds this machine can hold, refused before any rank starts.
#include "ddph/launch/world_size.h"

#include <gtest/gtest.h>

#include <string>

#include "ddph/common/error.h"

namespace ddph::launch {
namespace {

TEST(WorldSize, APythonWorldNeedsAPortPerOrderedPairOfRanks) {
  EXPECT_EQ(maxPythonWorldSize(28232), 168);  // the kernel's default range, 32768-60999
  EXPECT_EQ(maxPythonWorldSize(168 * 167), 168);
  EXPECT_EQ(maxPythonWorldSize(168 * 167 - 1), 167);
  EXPECT_EQ(maxPythonWorldSize(1), 1);
  EXPECT_GT(ephemeralPortCount(), 0);
}

std::string refusal(const std::vector<std::string>& command, int n) {
  try {
    checkWorldSize(command, n);
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(WorldSize, RefusalsNameTheBoundAndWhy) {
  EXPECT_EQ(refusal({"ddp-train"}, 0), "-n must be positive, got 0");
  EXPECT_NE(refusal({"ddp-train"}, 100000).find("above the launcher's limit of 2048 ranks"),
            std::string::npos);
  EXPECT_EQ(refusal({"ddp-train"}, 2048), "");
  const int bound = maxPythonWorldSize(ephemeralPortCount());
  EXPECT_EQ(refusal({"python3", "train.py"}, bound), "");
  const std::string python = refusal({"python3", "train.py"}, bound + 1);
  EXPECT_NE(python.find("-n " + std::to_string(bound + 1) + " is above " + std::to_string(bound)),
            std::string::npos)
      << python;
  EXPECT_EQ(refusal({"./ddp-train"}, bound + 1), "");  // LibTorch ranks are not Python's Gloo
}

}  // namespace
}  // namespace ddph::launch
