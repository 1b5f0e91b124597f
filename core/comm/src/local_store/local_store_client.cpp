// The local store's client: one connection, one question at a time (a mutex), every wait under a
// deadline. A get that timed out leaves its reply pending on the server, so the connection is
// broken from then on (ProtocolError): the rank is failing anyway.
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "ddph/comm/local_store.h"
#include "ddph/common/error.h"
#include "local_store_protocol.h"

namespace ddph::comm {

using common::Error;
using common::ProtocolError;
using common::TimeoutError;

namespace {

using Clock = std::chrono::steady_clock;
using local_store::Op;

class LocalStoreClient final : public RendezvousStore {
 public:
  LocalStoreClient(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {}
  ~LocalStoreClient() override { ::close(fd_); }

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    const std::string_view bytes(reinterpret_cast<const char*>(value.data()), value.size());
    const Exchange x{fmt::format("store set of '{}'", key), "init", timeout_};
    write(local_store::encodeRequest(Op::kSet, key, bytes), x);
  }

  std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout,
                                const std::string& step) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    const Exchange x{fmt::format("store wait for '{}'", key), step, timeout};
    write(local_store::encodeRequest(Op::kGet, key), x);
    const auto size = local_store::readRaw<std::uint32_t>(read(sizeof(std::uint32_t), x).data());
    const std::string value = read(size, x);
    return std::vector<std::uint8_t>(value.begin(), value.end());
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    const Exchange x{fmt::format("store add to '{}'", key), "init", timeout_};
    write(local_store::encodeRequest(Op::kAdd, key, {}, delta), x);
    return local_store::readRaw<std::int64_t>(read(sizeof(std::int64_t), x).data());
  }

 private:
  struct Exchange {
    std::string operation;
    std::string step;
    std::chrono::milliseconds budget;
    Clock::time_point deadline = Clock::now() + budget;
  };

  // Waits until fd_ is ready for `events` or the exchange's deadline passes.
  void await(short events, const Exchange& x) {
    while (true) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(x.deadline - Clock::now());
      if (left.count() <= 0) {
        broken_ = true;
        throw TimeoutError(fmt::format("{} at {} timed out after {} ms", x.operation, x.step,
                                       x.budget.count()));
      }
      pollfd p{fd_, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60000)));
      if (n > 0) return;
      if (n < 0 && errno != EINTR) fail(x, ::strerror(errno));
    }
  }

  [[noreturn]] void fail(const Exchange& x, const std::string& why) {
    broken_ = true;
    throw ProtocolError(fmt::format("{} at {} failed (the store's host is gone): {}", x.operation,
                                    x.step, why));
  }

  void write(const std::string& frame, const Exchange& x) {
    if (broken_) fail(x, "the connection broke in an earlier store call");
    std::size_t sent = 0;
    while (sent < frame.size()) {
      const ssize_t n =
          ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        await(POLLOUT, x);
      } else if (n < 0 && errno != EINTR) {
        fail(x, ::strerror(errno));
      }
    }
  }

  std::string read(std::size_t bytes, const Exchange& x) {
    std::string out(bytes, '\0');
    std::size_t got = 0;
    while (got < bytes) {
      const ssize_t n = ::recv(fd_, out.data() + got, bytes - got, MSG_DONTWAIT);
      if (n > 0) {
        got += static_cast<std::size_t>(n);
      } else if (n == 0) {
        fail(x, "the connection was closed");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        await(POLLIN, x);
      } else if (errno != EINTR) {
        fail(x, ::strerror(errno));
      }
    }
    return out;
  }

  int fd_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  bool broken_ = false;
};

}  // namespace

std::shared_ptr<RendezvousStore> connectLocalStore(const std::string& path,
                                                   std::chrono::milliseconds timeout) {
  const sockaddr_un address = local_store::socketAddress(path);
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error(fmt::format("local store: socket: {}", ::strerror(errno)));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
      return std::make_shared<LocalStoreClient>(fd, timeout);
    }
    const int error = errno;
    ::close(fd);
    // Not bound yet, bound but not listening yet, or its backlog full: the server is starting.
    if (error != ENOENT && error != ECONNREFUSED && error != EAGAIN && error != EINTR) {
      throw Error(fmt::format("cannot connect to the store at {}: {}", path, ::strerror(error)));
    }
    if (Clock::now() > deadline) {
      throw TimeoutError(fmt::format("connecting to the store at {} timed out after {} ms ({})",
                                     path, timeout.count(), ::strerror(error)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace ddph::comm
