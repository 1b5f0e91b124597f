#pragma once
// How many ranks `ddp-sim launch` starts on this machine: checked before any rank starts, so that
// a world that cannot connect never forks hundreds of ranks first (docs/ddp-sim.md, "How far a
// launch goes").

#include <string>
#include <vector>

namespace ddph::launch {

/// The most ranks the launcher supervises: the scale it is built and tested for (the supervisor's
/// pipes and polling, as `ddp-sim run`'s forked worlds; docs/design-notes.md, "Scale").
inline constexpr int kMaxLaunchWorldSize = 2048;

/// The ports of the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range; 28232 for
/// the default 32768-60999 when it cannot be read).
int ephemeralPortCount();

/// The most ranks of a Python (torch) program whose Gloo can connect on one loopback address: each
/// of the W x (W - 1) ordered rank pairs binds a port of its own from the ephemeral range, so W is
/// the largest with W x (W - 1) <= `ports` (168 for the default range; W = 192 fails in Gloo's
/// bind, W = 160 runs: docs/benchmarks.md).
int maxPythonWorldSize(int ports);

/// Throws ConfigError (one line naming the bound and why) when `numRanks` ranks of `command` cannot
/// run here: above kMaxLaunchWorldSize, above the process limit (RLIMIT_NPROC), or, for a Python
/// program, above maxPythonWorldSize(ephemeralPortCount()).
void checkWorldSize(const std::vector<std::string>& command, int numRanks);

/// The ports one emulated node's address needs for a Python world of `nodes` x `perNode` ranks:
/// ports are per bound address, and each of the node's ranks binds one for each of its W - 1 peers.
long long nodePortsNeeded(int nodes, int perNode);

/// As checkWorldSize for `ddp-sim launch --nnodes N -n M` (W = N x M): both positive, W within the
/// launcher's and the process limit, and for a Python program nodePortsNeeded within the
/// ephemeral range (each node binds its own address: docs/multi-node.md).
void checkNodeWorldSize(const std::vector<std::string>& command, int nodes, int perNode);

}  // namespace ddph::launch
