// findFreePort: a port outside the kernel's ephemeral range, checked free as a store binds it.
#include "ddph/launch/master_port.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <random>
#include <vector>

#include "ddph/common/error.h"

namespace ddph::launch {

using common::ConfigError;
using common::Error;

std::pair<std::uint16_t, std::uint16_t> ephemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  long first = 0, last = 0;
  if (in >> first >> last && 0 < first && first <= last && last <= 65535) {
    return {static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last)};
  }
  return {32768, 60999};
}

namespace {

// Whether `port` can be bound, as a TCPStore binds it (every address, IPv6 with IPv4 mapped) and
// on `address`. The socket is closed at once: the port is free, not reserved.
bool portIsFree(const sockaddr_in& address, std::uint16_t port) {
  const int v6 = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (v6 >= 0) {
    int no = 0;
    ::setsockopt(v6, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    any.sin6_port = htons(port);
    const bool bound = ::bind(v6, reinterpret_cast<const sockaddr*>(&any), sizeof(any)) == 0;
    ::close(v6);
    if (!bound) return false;
  }
  const int v4 = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (v4 < 0) return false;
  sockaddr_in at = address;
  at.sin_port = htons(port);
  const bool bound = ::bind(v4, reinterpret_cast<const sockaddr*>(&at), sizeof(at)) == 0;
  ::close(v4);
  return bound;
}

// A port the kernel hands out itself (bind to port 0): in the ephemeral range.
std::uint16_t kernelChosenPort(sockaddr_in addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(fmt::format("socket: {}", ::strerror(errno)));
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = ::strerror(errno);
    ::close(fd);
    throw Error(fmt::format("cannot find a free port: {}", why));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

std::uint16_t findFreePort(const std::string& address) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    throw ConfigError(fmt::format("'{}' is not an IPv4 address", address));
  }
  // The unprivileged ports outside the range: below it, then above it.
  const auto [first, last] = ephemeralPortRange();
  std::vector<std::pair<int, int>> spans;
  if (first > 1024) spans.emplace_back(1024, first - 1);
  if (last < 65535) spans.emplace_back(last + 1, 65535);
  long outside = 0;
  for (const auto& [lo, hi] : spans) outside += hi - lo + 1;
  std::random_device seed;
  std::mt19937_64 random(seed());
  for (int attempt = 0; outside > 0 && attempt < 200; ++attempt) {
    long pick = std::uniform_int_distribution<long>(0, outside - 1)(random);
    for (const auto& [lo, hi] : spans) {
      if (pick <= hi - lo) {
        const auto port = static_cast<std::uint16_t>(lo + pick);
        if (portIsFree(addr, port)) return port;
        break;
      }
      pick -= hi - lo + 1;
    }
  }
  return kernelChosenPort(addr);
}

}  // namespace ddph::launch
