#pragma once
// MASTER_PORT for a launch: a free port where no outgoing connection can take it (docs/ddp-sim.md,
// "The master port").
#include <cstdint>
#include <string>
#include <utility>

namespace ddph::launch {

/// A port on `address` nobody holds right now, chosen outside the kernel's ephemeral range
/// (/proc/sys/net/ipv4/ip_local_port_range), where no outgoing connection (another job's Gloo
/// pairs) can take it before rank 0's store binds it; checked free by binding it, as the store
/// will (every address, IPv6 and IPv4). A port of the range only when none outside is free.
std::uint16_t findFreePort(const std::string& address = "127.0.0.1");

/// The kernel's ephemeral port range, [first, last] (Linux's default when it cannot be read).
std::pair<std::uint16_t, std::uint16_t> ephemeralPortRange();

}  // namespace ddph::launch
