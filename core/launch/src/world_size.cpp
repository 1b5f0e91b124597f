// checkWorldSize: the world sizes this machine can hold, refused before any rank starts.
#include "ddph/launch/world_size.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <fstream>

#include "ddph/common/error.h"
#include "ddph/launch/python_program.h"

namespace ddph::launch {

namespace {

constexpr const char* kPortRangeFile = "/proc/sys/net/ipv4/ip_local_port_range";

struct PortRange {
  long low = 32768;
  long high = 60999;
};

PortRange ephemeralRange() {
  PortRange range;
  std::ifstream in(kPortRangeFile);
  long low = 0, high = 0;
  if (in >> low >> high && low > 0 && high >= low && high < 65536) range = {low, high};
  return range;
}

}  // namespace

int ephemeralPortCount() {
  const PortRange range = ephemeralRange();
  return static_cast<int>(range.high - range.low + 1);
}

int maxPythonWorldSize(int ports) {
  long w = 1;
  while ((w + 1) * w <= ports) ++w;
  return static_cast<int>(w);
}

namespace {

// The launcher's own limit and the user's process limit, for a world of `numRanks` spelled `what`.
void checkProcesses(long long numRanks, const std::string& what) {
  DDPH_CHECK(numRanks <= kMaxLaunchWorldSize,
             "{} is above the launcher's limit of {} ranks (the scale its supervision is built "
             "and tested for, as ddp-sim run's)",
             what, kMaxLaunchWorldSize);
  rlimit processes{};
  if (::getrlimit(RLIMIT_NPROC, &processes) == 0 && processes.rlim_cur != RLIM_INFINITY) {
    DDPH_CHECK(static_cast<rlim_t>(numRanks) < processes.rlim_cur,
               "{} is above this user's process limit of {} (ulimit -u)", what,
               static_cast<unsigned long long>(processes.rlim_cur));
  }
}

}  // namespace

void checkWorldSize(const std::vector<std::string>& command, int numRanks) {
  DDPH_CHECK(numRanks > 0, "-n must be positive, got {}", numRanks);
  checkProcesses(numRanks, fmt::format("-n {}", numRanks));
  if (command.empty() || !isPythonInterpreter(command[0])) return;
  const PortRange range = ephemeralRange();
  const int ports = static_cast<int>(range.high - range.low + 1);
  const int bound = maxPythonWorldSize(ports);
  DDPH_CHECK(numRanks <= bound,
             "-n {} is above {}, the most Python ranks whose Gloo can connect on this machine: each "
             "of the W x (W - 1) rank pairs binds its own port on the one loopback address, and the "
             "ephemeral range {}-{} ({}) holds {} ports",
             numRanks, bound, range.low, range.high, kPortRangeFile, ports);
}

long long nodePortsNeeded(int nodes, int perNode) {
  const long long world = static_cast<long long>(nodes) * perNode;
  return perNode * (world - 1);
}

void checkNodeWorldSize(const std::vector<std::string>& command, int nodes, int perNode) {
  DDPH_CHECK(nodes > 0, "--nnodes must be positive, got {}", nodes);
  DDPH_CHECK(perNode > 0, "-n must be positive, got {}", perNode);
  const long long world = static_cast<long long>(nodes) * perNode;
  const std::string what = fmt::format("--nnodes {} -n {} (W = {})", nodes, perNode, world);
  checkProcesses(world, what);
  if (command.empty() || !isPythonInterpreter(command[0])) return;
  const PortRange range = ephemeralRange();
  const long long ports = range.high - range.low + 1;
  const long long needed = nodePortsNeeded(nodes, perNode);
  DDPH_CHECK(needed <= ports,
             "{} is more Python ranks than Gloo can connect on this machine: each node's {} ranks "
             "bind a port for each of their {} peers on the node's own loopback address, {} ports "
             "an address, and the ephemeral range {}-{} ({}) holds {}",
             what, perNode, world - 1, needed, range.low, range.high, kPortRangeFile, ports);
}

}  // namespace ddph::launch
