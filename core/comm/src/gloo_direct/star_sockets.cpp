#include "star_sockets.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "ddph/common/error.h"

namespace ddph::comm::gloo_direct {

using common::ConfigError;
using common::Error;
using common::ProtocolError;
using common::TimeoutError;

namespace {

using Clock = StarSockets::Clock;

// Precedes every message: which collective (the communicator's tag) and how many bytes follow.
struct Header {
  std::uint32_t tag = 0;
  std::uint32_t unused = 0;
  std::uint64_t bytes = 0;
};

int msLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1 << 30));
}

// Waits until `fd` is ready for `events`; false once `deadline` passed.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, msLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) throw std::runtime_error(fmt::format("poll: {}", ::strerror(errno)));
  }
}

// A host name or numeric address (IPv4 or IPv6) and a port, as Gloo's device resolves its
// hostname (MASTER_ADDR may be "localhost").
struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family() const { return storage.ss_family; }
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
};

Address resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw ConfigError(fmt::format("star sockets: cannot resolve '{}': {}", host, ::gai_strerror(rc)));
  }
  Address a;
  std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
  a.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return a;
}

int portOf(const Address& a) {
  return a.family() == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port)
                                : ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
}

int tcpSocket(int family) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(fmt::format("socket: {}", ::strerror(errno)));
  return fd;
}

void noDelay(int fd) {
  int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

std::string rank0Key(const std::string& prefix) { return prefix + "/star-sockets/rank0"; }

// Reads exactly `bytes` from a non-blocking socket; false past the deadline, throws when the peer
// closed the connection.
bool readExactly(int fd, void* data, std::size_t bytes, Clock::time_point deadline, int peer) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = ::recv(fd, p, bytes, 0);
    if (got > 0) {
      p += got;
      bytes -= static_cast<std::size_t>(got);
      continue;
    }
    if (got == 0) throw std::runtime_error(fmt::format("rank {} closed its connection", peer));
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      throw std::runtime_error(fmt::format("read from rank {}: {}", peer, ::strerror(errno)));
    }
    if (!waitFor(fd, POLLIN, deadline)) return false;
  }
  return true;
}

// Rank 0: listens on `self` and publishes the address the others connect to under `prefix`.
void listenAndPublish(int listener, Address& self, RendezvousStore& store, const std::string& prefix,
                      const std::string& hostname, int size) {
  if (::bind(listener, self.get(), self.length) != 0 || ::listen(listener, size) != 0) {
    throw Error(fmt::format("star sockets: bind/listen on {}: {}", hostname, ::strerror(errno)));
  }
  socklen_t len = sizeof(self.storage);
  ::getsockname(listener, self.get(), &len);
  const std::string address = fmt::format("{}:{}", hostname, portOf(self));
  store.set(rank0Key(prefix), std::vector<std::uint8_t>(address.begin(), address.end()));
}

// The next connection to rank 0's listener, or -1 when there is none yet (then try again);
// throws TimeoutError past the deadline, `joined` of `size` ranks being connected.
int acceptNext(int listener, Clock::time_point deadline, int joined, int size) {
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno == EINTR || errno == ECONNABORTED) return -1;
  if (errno != EAGAIN && errno != EWOULDBLOCK) {
    throw Error(fmt::format("star sockets: accept: {}", ::strerror(errno)));
  }
  if (!waitFor(listener, POLLIN, deadline)) {
    throw TimeoutError(fmt::format(
        "star sockets: {} of {} ranks connected to rank 0 before the deadline", joined, size));
  }
  return -1;
}

// The rank a new connection names first; false when it named none before the deadline.
bool readRank(int fd, std::int32_t& who, Clock::time_point deadline) {
  try {
    return readExactly(fd, &who, sizeof(who), deadline, -1);
  } catch (const std::exception&) {
    return false;  // a connection that closes before naming its rank is not one of ours
  }
}

// "host:port" that rank 0 published, waited for until the deadline.
std::string rank0Address(RendezvousStore& store, const std::string& prefix, Clock::time_point deadline) {
  const auto value = store.get(rank0Key(prefix), std::max(std::chrono::milliseconds(1),
                                                          std::chrono::milliseconds(msLeft(deadline))),
                               "init");
  return std::string(value.begin(), value.end());
}

// Connects the non-blocking `fd` to rank 0 at `address`, waiting until the deadline.
void connectWithin(int fd, Address& peer, const std::string& address, Clock::time_point deadline) {
  if (::connect(fd, peer.get(), peer.length) == 0) return;
  if (errno != EINPROGRESS) {
    throw ProtocolError(fmt::format("star sockets: connect to rank 0 at {}: {}", address,
                                    ::strerror(errno)));
  }
  if (!waitFor(fd, POLLOUT, deadline)) {
    throw TimeoutError(fmt::format("star sockets: connect to rank 0 at {} timed out", address));
  }
  int error = 0;
  socklen_t len = sizeof(error);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
  if (error != 0) {
    throw ProtocolError(fmt::format("star sockets: connect to rank 0 at {}: {}", address,
                                    ::strerror(error)));
  }
}

}  // namespace

StarSockets::StarSockets(RendezvousStore& store, const std::string& prefix, int rank, int size,
                         const std::string& hostname, Clock::time_point deadline)
    : rank_(rank), size_(size), fds_(static_cast<std::size_t>(rank == 0 ? size : 1), -1) {
  DDPH_ASSERT(size > 1 && rank >= 0 && rank < size);
  try {
    if (rank == 0) {
      acceptRanks(store, prefix, hostname, deadline);
    } else {
      connectToRank0(store, prefix, hostname, deadline);
    }
  } catch (...) {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
    throw;
  }
}

void StarSockets::acceptRanks(RendezvousStore& store, const std::string& prefix,
                              const std::string& hostname, Clock::time_point deadline) {
  Address self = resolve(hostname, 0);
  const int listener = tcpSocket(self.family());
  fds_[0] = listener;  // closed below, or by the constructor's handler on a throw
  listenAndPublish(listener, self, store, prefix, hostname, size_);
  for (int joined = 1; joined < size_;) {
    const int fd = acceptNext(listener, deadline, joined, size_);
    if (fd < 0) continue;
    std::int32_t who = -1;
    const bool ok = readRank(fd, who, deadline);
    if (!ok || who <= 0 || who >= size_ || fds_[static_cast<std::size_t>(who)] >= 0) {
      ::close(fd);
      if (!ok && Clock::now() >= deadline) {
        throw TimeoutError("star sockets: a connection to rank 0 did not name its rank");
      }
      continue;
    }
    noDelay(fd);
    fds_[static_cast<std::size_t>(who)] = fd;
    ++joined;
  }
  ::close(listener);
  fds_[0] = -1;
}

void StarSockets::connectToRank0(RendezvousStore& store, const std::string& prefix,
                                 const std::string& hostname, Clock::time_point deadline) {
  const std::string address = rank0Address(store, prefix, deadline);
  const auto colon = address.rfind(':');
  DDPH_CHECK(colon != std::string::npos, "star sockets: bad rank 0 address '{}'", address);
  Address peer = resolve(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  Address self = resolve(hostname, 0);
  const int fd = tcpSocket(peer.family());
  fds_[0] = fd;  // closed by the constructor's handler on a throw
  if (self.family() == peer.family() && ::bind(fd, self.get(), self.length) != 0) {
    throw Error(fmt::format("star sockets: bind {}: {}", hostname, ::strerror(errno)));
  }
  connectWithin(fd, peer, address, deadline);
  noDelay(fd);
  const std::int32_t me = rank_;
  if (::send(fd, &me, sizeof(me), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(me))) {
    throw ProtocolError(fmt::format("star sockets: rank 0 at {} left", address));
  }
}

StarSockets::~StarSockets() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

int StarSockets::fdOf(int peer) const {
  return fds_[static_cast<std::size_t>(rank_ == 0 ? peer : 0)];
}

void StarSockets::send(int peer, std::uint32_t tag, const void* data, std::size_t bytes,
                       Clock::time_point deadline) {
  Header header;
  header.tag = tag;
  header.bytes = bytes;
  const int fd = fdOf(peer);
  iovec iov[2] = {{&header, sizeof(header)}, {const_cast<void*>(data), bytes}};
  std::size_t first = 0;  // the first iovec not yet fully written
  while (first < 2) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = 2 - first;
    const ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        throw std::runtime_error(fmt::format("rank {} left (write: {})", peer, ::strerror(errno)));
      }
      if (!waitFor(fd, POLLOUT, deadline)) {
        throw std::runtime_error(fmt::format("timed out writing to rank {}", peer));
      }
      continue;
    }
    auto left = static_cast<std::size_t>(sent);
    while (first < 2 && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      iov[first].iov_len = 0;
      ++first;
    }
    if (first < 2) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

void StarSockets::recv(int peer, std::uint32_t tag, void* data, std::size_t bytes,
                       Clock::time_point deadline) {
  const int fd = fdOf(peer);
  Header header;
  if (!readExactly(fd, &header, sizeof(header), deadline, peer)) {
    throw std::runtime_error(fmt::format("timed out waiting for rank {}", peer));
  }
  if (header.tag != tag || header.bytes != bytes) {
    throw std::runtime_error(fmt::format(
        "rank {} sent {} bytes of collective #{} where {} bytes of collective #{} were expected "
        "(the ranks called different collectives)",
        peer, header.bytes, header.tag, bytes, tag));
  }
  if (!readExactly(fd, data, bytes, deadline, peer)) {
    throw std::runtime_error(fmt::format("timed out waiting for rank {}", peer));
  }
}

void StarSockets::gather(const void* mine, std::size_t bytes, void* all, std::uint32_t tag,
                         Clock::time_point deadline) {
  if (rank_ != 0) {
    send(0, tag, mine, bytes, deadline);
    return;
  }
  char* out = static_cast<char*>(all);
  std::vector<char> dropped(out == nullptr ? bytes : 0);
  if (out != nullptr) std::copy_n(static_cast<const char*>(mine), bytes, out);
  // In rank order: bytes of ranks that come early wait in their sockets.
  for (int r = 1; r < size_; ++r) {
    recv(r, tag, out == nullptr ? dropped.data() : out + static_cast<std::size_t>(r) * bytes,
         bytes, deadline);
  }
}

void StarSockets::broadcast(void* data, std::size_t bytes, int root, std::uint32_t tag,
                            Clock::time_point deadline) {
  if (root != 0) {
    if (rank_ == root) send(0, tag, data, bytes, deadline);
    if (rank_ == 0) recv(root, tag, data, bytes, deadline);
  }
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) {
      if (r != root) send(r, tag, data, bytes, deadline);
    }
  } else if (rank_ != root) {
    recv(0, tag, data, bytes, deadline);
  }
}

}  // namespace ddph::comm::gloo_direct
