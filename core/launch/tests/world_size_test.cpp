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

std::string nodeRefusal(const std::vector<std::string>& command, int nodes, int perNode) {
  try {
    checkNodeWorldSize(command, nodes, perNode);
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "";
}

// Ports are per bound address: each emulated node's ranks bind theirs on the node's own address,
// so the cap is per node, M x (W - 1), not W x (W - 1).
TEST(WorldSize, EmulatedNodesCountPortsPerNodeAddress) {
  EXPECT_EQ(nodePortsNeeded(2, 2), 2 * 3);
  EXPECT_EQ(nodePortsNeeded(64, 8), 8 * 511);
  EXPECT_EQ(nodeRefusal({"python3", "t.py"}, 0, 2), "--nnodes must be positive, got 0");
  EXPECT_EQ(nodeRefusal({"python3", "t.py"}, 2, 0), "-n must be positive, got 0");
  EXPECT_NE(nodeRefusal({"python3", "t.py"}, 64, 64).find("(W = 4096) is above the launcher's limit"),
            std::string::npos);
  const int ports = ephemeralPortCount();
  if (ports >= 8 * 511) EXPECT_EQ(nodeRefusal({"python3", "t.py"}, 64, 8), "");  // W = 512
  const std::string tooMany = nodeRefusal({"python3", "t.py"}, 2, 1000);
  EXPECT_NE(tooMany.find("each node's 1000 ranks bind a port for each of their 1999 peers"),
            std::string::npos)
      << tooMany;
  EXPECT_EQ(nodeRefusal({"./ddp-train"}, 2, 1000), "");  // LibTorch ranks are not Python's Gloo
}

}  // namespace
}  // namespace ddph::launch
