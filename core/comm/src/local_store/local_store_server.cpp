// The local store's server: one thread, one epoll set over the listening socket, every client
// connection and an eventfd that stops it. A get whose key is not there yet parks its connection
// until a set or an add makes it; every client asks one question at a time, so a connection has
// at most one reply pending.
#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ddph/comm/local_store.h"
#include "ddph/common/error.h"
#include "local_store_protocol.h"

namespace ddph::comm {

using common::Error;

namespace {

using local_store::Op;

struct Connection {
  std::string in;    ///< bytes received, not yet a whole request
  std::string out;   ///< reply bytes not yet written
  std::string parkedOn;  ///< the key its get waits for ("" when none)
  bool parked = false;
};

std::int64_t parseCounter(const std::string& text) {
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

}  // namespace

struct LocalStoreServer::Impl {
  std::string path;
  int listenFd = -1;
  int stopFd = -1;
  int epollFd = -1;
  std::unordered_map<int, Connection> connections;
  std::unordered_map<std::string, std::string> values;
  std::unordered_map<std::string, std::vector<int>> parked;  ///< key → connections waiting
  std::thread thread;

  void watch(int fd, std::uint32_t events, int op) {
    epoll_event event{};
    event.events = events;
    event.data.fd = fd;
    if (::epoll_ctl(epollFd, op, fd, &event) != 0 && op != EPOLL_CTL_DEL) {
      throw Error(fmt::format("local store: epoll_ctl: {}", ::strerror(errno)));
    }
  }

  void serve() {
    std::vector<epoll_event> events(256);
    while (true) {
      const int n = ::epoll_wait(epollFd, events.data(), static_cast<int>(events.size()), -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;
      }
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<std::size_t>(i)].data.fd;
        const std::uint32_t what = events[static_cast<std::size_t>(i)].events;
        if (fd == stopFd) return;
        if (fd == listenFd) {
          acceptAll();
        } else {
          if (what & EPOLLOUT) flush(fd);
          if (what & (EPOLLIN | EPOLLHUP | EPOLLERR)) receive(fd);
        }
      }
    }
  }

  void acceptAll() {
    while (true) {
      const int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN: none left; anything else: the client's own problem
      connections.emplace(fd, Connection{});
      watch(fd, EPOLLIN, EPOLL_CTL_ADD);
    }
  }

  void receive(int fd) {
    auto found = connections.find(fd);
    if (found == connections.end()) return;
    char buffer[65536];
    while (true) {
      const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
      if (got > 0) {
        found->second.in.append(buffer, static_cast<std::size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // The client left (its requests before leaving still count: a set then exit is a set).
      handleRequests(fd);
      close(fd);
      return;
    }
    if (!handleRequests(fd)) close(fd);
  }

  // Handles every whole request in the connection's buffer; false when one breaks the protocol.
  bool handleRequests(int fd) {
    auto found = connections.find(fd);
    if (found == connections.end()) return false;
    std::string& in = found->second.in;
    std::size_t at = 0;
    const auto need = [&](std::size_t bytes) { return in.size() - at >= bytes; };
    while (need(1 + sizeof(std::uint32_t))) {
      const auto op = static_cast<Op>(in[at]);
      if (op != Op::kSet && op != Op::kGet && op != Op::kAdd) return false;
      const auto keyBytes = local_store::readRaw<std::uint32_t>(in.data() + at + 1);
      if (keyBytes > local_store::kMaxKeyBytes) return false;
      std::size_t end = at + 1 + sizeof(std::uint32_t) + keyBytes;
      if (in.size() < end) break;
      std::string key = in.substr(at + 1 + sizeof(std::uint32_t), keyBytes);
      if (op == Op::kSet) {
        if (in.size() < end + sizeof(std::uint32_t)) break;
        const auto valueBytes = local_store::readRaw<std::uint32_t>(in.data() + end);
        if (valueBytes > local_store::kMaxValueBytes) return false;
        if (in.size() < end + sizeof(std::uint32_t) + valueBytes) break;
        set(key, in.substr(end + sizeof(std::uint32_t), valueBytes));
        end += sizeof(std::uint32_t) + valueBytes;
      } else if (op == Op::kAdd) {
        if (in.size() < end + sizeof(std::int64_t)) break;
        const auto delta = local_store::readRaw<std::int64_t>(in.data() + end);
        end += sizeof(std::int64_t);
        const std::int64_t total = parseCounter(values[key]) + delta;
        std::string reply;
        local_store::appendRaw(reply, total);
        send(fd, reply);
        set(key, std::to_string(total));  // c10d's TCPStore keeps counters as decimal text too
      } else {
        get(fd, key);
      }
      at = end;
    }
    in.erase(0, at);
    return true;
  }

  void set(const std::string& key, std::string value) {
    auto& stored = values[key];
    stored = std::move(value);
    const auto waiting = parked.find(key);
    if (waiting == parked.end()) return;
    const std::vector<int> fds = std::move(waiting->second);
    parked.erase(waiting);
    for (int fd : fds) {
      auto c = connections.find(fd);
      if (c == connections.end()) continue;
      c->second.parked = false;
      reply(fd, stored);
    }
  }

  void get(int fd, const std::string& key) {
    const auto found = values.find(key);
    if (found != values.end()) {
      reply(fd, found->second);
      return;
    }
    auto& c = connections.at(fd);
    c.parked = true;
    c.parkedOn = key;
    parked[key].push_back(fd);
  }

  void reply(int fd, const std::string& value) {
    std::string frame;
    local_store::appendBytes(frame, value);
    send(fd, frame);
  }

  void send(int fd, const std::string& bytes) {
    auto& c = connections.at(fd);
    const bool idle = c.out.empty();
    c.out += bytes;
    if (idle) flush(fd);
  }

  void flush(int fd) {
    auto found = connections.find(fd);
    if (found == connections.end()) return;
    std::string& out = found->second.out;
    std::size_t sent = 0;
    while (sent < out.size()) {
      const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      out.clear();  // the client is gone; its EOF closes the connection
      return;
    }
    out.erase(0, sent);
    watch(fd, out.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
  }

  void close(int fd) {
    auto found = connections.find(fd);
    if (found == connections.end()) return;
    if (found->second.parked) {
      auto& fds = parked[found->second.parkedOn];
      fds.erase(std::remove(fds.begin(), fds.end(), fd), fds.end());
      if (fds.empty()) parked.erase(found->second.parkedOn);
    }
    watch(fd, 0, EPOLL_CTL_DEL);
    ::close(fd);
    connections.erase(found);
  }

  void release() {
    for (auto& [fd, connection] : connections) ::close(fd);
    connections.clear();
    for (int fd : {listenFd, stopFd, epollFd}) {
      if (fd >= 0) ::close(fd);
    }
    if (listenFd >= 0) ::unlink(path.c_str());
  }
};

LocalStoreServer::LocalStoreServer(std::string path) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.path = std::move(path);
  const sockaddr_un address = local_store::socketAddress(s.path);
  try {
    s.epollFd = ::epoll_create1(EPOLL_CLOEXEC);
    s.stopFd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s.epollFd < 0 || s.stopFd < 0) {
      throw Error(fmt::format("local store: {}", ::strerror(errno)));
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error(fmt::format("local store: socket: {}", ::strerror(errno)));
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      const int bindError = errno;
      ::close(fd);
      throw Error(fmt::format("local store: cannot bind {}: {}", s.path, ::strerror(bindError)));
    }
    s.listenFd = fd;
    // Every rank connects at once: the backlog holds them until the thread accepts.
    if (::listen(fd, SOMAXCONN) != 0) {
      throw Error(fmt::format("local store: listen on {}: {}", s.path, ::strerror(errno)));
    }
    s.watch(s.listenFd, EPOLLIN, EPOLL_CTL_ADD);
    s.watch(s.stopFd, EPOLLIN, EPOLL_CTL_ADD);
  } catch (...) {
    s.release();
    throw;
  }
  s.thread = std::thread([&s] { s.serve(); });
}

LocalStoreServer::~LocalStoreServer() {
  const std::uint64_t one = 1;
  if (::write(impl_->stopFd, &one, sizeof(one)) < 0) {
    // An eventfd write fails only on overflow, which one write cannot reach.
  }
  impl_->thread.join();
  impl_->release();
}

const std::string& LocalStoreServer::path() const { return impl_->path; }

}  // namespace ddph::comm
