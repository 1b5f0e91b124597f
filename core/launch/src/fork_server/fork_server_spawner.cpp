// ForkServerSpawner: ranks forked from python/ddph_launch/fork_server.py, which imported torch
// once. The protocol is in that file's docstring; the server is the ranks' parent, so it reaps
// them and reports how each ended.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <thread>

#include "ddph/common/error.h"
#include "ddph/launch/rank_spawner.h"

namespace ddph::launch {

using common::ChildOptions;
using common::ChildProcess;
using common::Error;
using common::ExitStatus;
using common::StreamTarget;

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::size_t kMaxMessage = 1 << 20;
// Forking one rank: milliseconds, unless the machine is swapping; generous, as every deadline.
constexpr std::chrono::seconds kForkDeadline{120};
constexpr std::chrono::seconds kReapDeadline{30};

// The launcher's end of the server's socket, and what the server has said about its ranks.
class ForkServer {
 public:
  ForkServer(std::unique_ptr<ChildProcess> process, int socket)
      : process_(std::move(process)), socket_(socket) {}
  ~ForkServer() {
    ::close(socket_);  // the server kills what still runs, then exits; the ChildProcess reaps it
  }
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  /// The next message, waiting until `deadline` (or until `interruptFd` is readable); nothing
  /// then, or when the server has gone (dead()).
  std::optional<json> receive(Clock::time_point deadline, int interruptFd = -1) {
    while (!dead_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd fds[2] = {{socket_, POLLIN, 0}, {interruptFd, POLLIN, 0}};
      const int n = ::poll(fds, interruptFd >= 0 ? 2 : 1, static_cast<int>(std::max<long>(0, left.count())));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      if (interruptFd >= 0 && (fds[1].revents & POLLIN) && !(fds[0].revents & POLLIN)) return std::nullopt;
      if (auto message = readOne()) return message;
    }
    return std::nullopt;
  }

  /// Takes in every message already sent (how ranks ended), without waiting.
  void drain() {
    while (!dead_) {
      auto message = receive(Clock::now());
      if (!message) return;
      handle(*message);
    }
  }

  /// Records an "ended" message; false for any other.
  bool handle(const json& message) {
    if (!message.contains("ended")) return false;
    ExitStatus status;
    if (message.contains("signal")) {
      status.signal = message["signal"].get<int>();
    } else {
      status.code = message.value("code", 0);
    }
    ended_[message["ended"].get<pid_t>()] = status;
    return true;
  }

  std::optional<ExitStatus> ended(pid_t pid) const {
    if (auto it = ended_.find(pid); it != ended_.end()) return it->second;
    // The server is gone, and with it (PR_SET_PDEATHSIG) every rank it had not reported.
    if (dead_) return ExitStatus{0, SIGKILL};
    return std::nullopt;
  }

  /// Sends a request with `fds` attached (they stay the caller's).
  void send(const json& request, const std::vector<int>& fds) {
    const std::string text = request.dump();
    iovec iov{const_cast<char*>(text.data()), text.size()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    while (::sendmsg(socket_, &msg, MSG_NOSIGNAL) < 0) {
      if (errno == EINTR) continue;
      throw Error(fmt::format("the fork server is gone: {}", ::strerror(errno)));
    }
  }

  bool dead() const { return dead_; }
  /// How the server itself ended, once it has.
  std::string describeEnd() {
    const auto status = process_->waitUntil(Clock::now() + std::chrono::seconds(5));
    return status ? status->describe() : "stopped answering";
  }

 private:
  std::optional<json> readOne() {
    std::string buffer(kMaxMessage, '\0');
    ssize_t n;
    while ((n = ::recv(socket_, buffer.data(), buffer.size(), MSG_DONTWAIT)) < 0 && errno == EINTR) {
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::nullopt;
    if (n <= 0) {
      dead_ = true;
      return std::nullopt;
    }
    buffer.resize(static_cast<std::size_t>(n));
    auto message = json::parse(buffer, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded()) throw Error("the fork server sent a message that is not JSON");
    return message;
  }

  std::unique_ptr<ChildProcess> process_;
  int socket_;
  bool dead_ = false;
  std::map<pid_t, ExitStatus> ended_;
};

class ForkedRank final : public RankProcess {
 public:
  ForkedRank(std::shared_ptr<ForkServer> server, pid_t pid, int out, int err)
      : server_(std::move(server)), pid_(pid), pipes_{-1, out, err} {}
  ~ForkedRank() override {
    for (int fd : pipes_) {
      if (fd >= 0) ::close(fd);
    }
  }

  pid_t pid() const override { return pid_; }
  pid_t processGroup() const override { return group_; }
  void started(pid_t pid, pid_t group) {
    pid_ = pid;
    group_ = group;
  }

  int takePipe(int stream) override {
    const int fd = pipes_[stream];
    pipes_[stream] = -1;
    return fd;
  }

  std::optional<ExitStatus> poll() override {
    server_->drain();
    return server_->ended(pid_);
  }

  void kill() override {
    ::kill(pid_, SIGKILL);
    const auto deadline = Clock::now() + kReapDeadline;
    while (!server_->ended(pid_) && Clock::now() < deadline) {
      if (auto message = server_->receive(deadline)) server_->handle(*message);
    }
  }

 private:
  std::shared_ptr<ForkServer> server_;
  pid_t pid_;
  pid_t group_ = 0;
  int pipes_[3];
};

// A pipe whose read end (close-on-exec) stays here; the write end goes to the rank.
std::pair<int, int> rankPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("cannot create a pipe: {}", ::strerror(errno)));
  return {fds[0], fds[1]};
}

class ForkServerSpawner final : public RankSpawner {
 public:
  explicit ForkServerSpawner(std::shared_ptr<ForkServer> server) : server_(std::move(server)) {}

  // The server puts every rank in one group of its own (led by a child that waits), whatever
  // `group` asks: it exists until the last rank has started, however early the first ends.
  std::unique_ptr<RankProcess> spawn(int rank, const EnvMap& own, pid_t /*group*/) override {
    auto [outRead, outWrite] = rankPipe();
    auto [errRead, errWrite] = rankPipe();
    try {
      server_->send({{"fork", rank}, {"env", own}}, {outWrite, errWrite});
    } catch (...) {
      for (int fd : {outRead, outWrite, errRead, errWrite}) ::close(fd);
      throw;
    }
    ::close(outWrite);
    ::close(errWrite);
    auto forked = std::make_unique<ForkedRank>(server_, 0, outRead, errRead);  // owns the read ends
    const auto deadline = Clock::now() + kForkDeadline;
    while (auto message = server_->receive(deadline)) {
      if (server_->handle(*message)) continue;
      if (message->value("forked", -1) != rank) continue;
      if (message->contains("error")) {
        throw Error(fmt::format("the fork server could not fork rank {}: {}", rank,
                                message->value("error", std::string())));
      }
      forked->started(message->value("pid", pid_t{0}), message->value("group", pid_t{0}));
      return forked;
    }
    throw Error(fmt::format("the fork server did not fork rank {}: it {}", rank,
                            server_->dead() ? server_->describeEnd() : "did not answer"));
  }

 private:
  std::shared_ptr<ForkServer> server_;
};

}  // namespace

ForkServerStart startForkServer(const std::vector<std::string>& serverCommand, const EnvMap& common,
                                const std::vector<std::string>& perRank, Clock::time_point deadline,
                                int interruptFd) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    return {nullptr, fmt::format("no socket for a fork server: {}", ::strerror(errno))};
  }
  ChildOptions options;
  options.env = common;
  for (const auto& name : perRank) options.env.erase(name);
  options.unsetEnv = perRank;  // a RANK the launcher itself inherited must not reach the server
  options.in = StreamTarget::descriptor(ends[1]);
  options.out = StreamTarget::null();  // as a rank's own stdout, not a terminal: block-buffered
  std::unique_ptr<ChildProcess> process;
  try {
    process = std::make_unique<ChildProcess>(serverCommand, std::move(options));
  } catch (const Error& e) {
    ::close(ends[0]);
    ::close(ends[1]);
    return {nullptr, e.what()};
  }
  ::close(ends[1]);
  auto server = std::make_shared<ForkServer>(std::move(process), ends[0]);
  const auto ready = server->receive(deadline, interruptFd);
  if (!ready) {
    return {nullptr, server->dead() ? fmt::format("the fork server {} before it was ready",
                                                  server->describeEnd())
                                    : std::string("the fork server was not ready in time")};
  }
  if (!ready->value("ready", false)) {
    return {nullptr, ready->value("why", std::string("?")),
            ready->value("hash_dependence", std::string())};
  }
  return {std::make_unique<ForkServerSpawner>(std::move(server)), {}};
}

}  // namespace ddph::launch
