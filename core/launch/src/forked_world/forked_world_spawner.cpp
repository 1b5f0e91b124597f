// ForkedSpawner: ranks forked from this process without exec (it has LibTorch loaded already, so
// no rank pays for loading it again), each running a RankMain and reporting through a result
// pipe. How `ddp-sim run` starts its ranks (forked_world.cpp).
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "ddph/common/error.h"
#include "ddph/common/stop_signals.h"
#include "ddph/launch/forked_world.h"
#include "ddph/launch/rank_spawner.h"

namespace ddph::launch {

using common::Error;
using common::ExitStatus;
using common::restoreDefaultStopSignals;

namespace {

// The read ends of the result pipes of the ranks forked so far and still held, by rank (-1: none):
// a rank forked later closes them, as it holds no other rank's pipe. A vector, written in one
// place a fork: what the parent writes between two forks is copied for the child forked before
// (NOTE [Reaping a large world]).
using ReadEnds = std::vector<int>;

class ForkedRankProcess final : public RankProcess {
 public:
  ForkedRankProcess(std::shared_ptr<ReadEnds> readEnds, int rank, pid_t pid, pid_t group,
                    int readEnd)
      : readEnds_(std::move(readEnds)), rank_(rank), pid_(pid), group_(group), readEnd_(readEnd) {}
  ~ForkedRankProcess() override {
    if (!status_) kill();  // a supervisor that gave up on it (an exception)
    (*readEnds_)[static_cast<std::size_t>(rank_)] = -1;
    ::close(readEnd_);
  }
  ForkedRankProcess(const ForkedRankProcess&) = delete;
  ForkedRankProcess& operator=(const ForkedRankProcess&) = delete;

  pid_t pid() const override { return pid_; }
  pid_t processGroup() const override { return group_; }
  int takePipe(int /*stream*/) override { return -1; }  // stdout and stderr are this process's
  int resultPipe() const override { return readEnd_; }
  double peakRssMb() const override { return peakRssMb_; }

  std::optional<ExitStatus> poll() override {
    if (!status_) reap(WNOHANG);
    return status_;
  }

  void kill() override {
    if (status_) return;
    ::kill(pid_, SIGKILL);
    reap(0);
  }

 private:
  void reap(int flags) {
    int status = 0;
    rusage usage{};
    pid_t got;
    while ((got = ::wait4(pid_, &status, flags, &usage)) < 0 && errno == EINTR) {
    }
    if (got == pid_) {
      status_ = ExitStatus::fromWaitStatus(status);
      peakRssMb_ = static_cast<double>(usage.ru_maxrss) / 1024.0;
    } else if (got < 0) {
      status_ = ExitStatus{0, SIGKILL};  // not ours to reap any more: never happens
    }
  }

  std::shared_ptr<ReadEnds> readEnds_;
  int rank_;
  pid_t pid_;
  pid_t group_;
  int readEnd_;
  std::optional<ExitStatus> status_;
  double peakRssMb_ = 0;
};

class ForkedSpawner final : public RankSpawner {
 public:
  explicit ForkedSpawner(RankMain rankMain) : rankMain_(std::move(rankMain)) {}

  std::unique_ptr<RankProcess> spawn(int rank, const EnvMap& own, pid_t group) override {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("pipe: {}", ::strerror(errno)));
    // Nothing buffered may be written twice: everything is flushed before the first fork, and
    // before a later one what this process wrote to stdout or stderr since. A flush of every
    // stream writes their locks, a page each rank would keep a copy of:
    // NOTE [Reaping a large world].
    if (!flushed_ || ::__fpending(stdout) > 0 || ::__fpending(stderr) > 0) std::fflush(nullptr);
    if (!flushed_) flushed_ = true;
    // Until the child has restored the default actions, a SIGTERM from the world's stop (a rank
    // that failed at once) would reach the supervisor's handler it inherited and be lost: the
    // rank would sleep on through the whole grace. Blocked across the fork, it stays pending.
    sigset_t stopSignals, previousMask;
    sigemptyset(&stopSignals);
    sigaddset(&stopSignals, SIGINT);
    sigaddset(&stopSignals, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &stopSignals, &previousMask);
    const pid_t pid = ::fork();
    if (pid != 0) ::pthread_sigmask(SIG_SETMASK, &previousMask, nullptr);
    if (pid < 0) {
      const int error = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      throw Error(fmt::format("fork: {}", ::strerror(error)));
    }
    if (pid == 0) runRank(rank, own, group, fds, previousMask);
    const pid_t ranksGroup = group != 0 ? group : pid;
    ::setpgid(pid, ranksGroup);  // as the child does: whichever runs first
    ::close(fds[1]);
    if (readEnds_->size() <= static_cast<std::size_t>(rank)) readEnds_->resize(rank + 1u, -1);
    (*readEnds_)[static_cast<std::size_t>(rank)] = fds[0];
    return std::make_unique<ForkedRankProcess>(readEnds_, rank, pid, ranksGroup, fds[0]);
  }

 private:
  // In the forked child: never returns.
  [[noreturn]] void runRank(int rank, const EnvMap& own, pid_t group, const int fds[2],
                            const sigset_t& previousMask) {
    ::setpgid(0, group);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent_) ::_exit(kRankInternalError);
    restoreDefaultStopSignals();
    ::pthread_sigmask(SIG_SETMASK, &previousMask, nullptr);
    ::close(fds[0]);
    for (const int fd : *readEnds_) {
      if (fd >= 0) ::close(fd);  // the other ranks' result pipes
    }
    for (const auto& [name, value] : own) ::setenv(name.c_str(), value.c_str(), 1);
    int code = kRankInternalError;
    try {
      code = rankMain_(rank, fds[1]);
    } catch (...) {
    }
    ::_exit(code);  // no destructors, no atexit: they belong to the parent
  }

  RankMain rankMain_;
  const pid_t parent_ = ::getpid();
  bool flushed_ = false;
  std::shared_ptr<ReadEnds> readEnds_ = std::make_shared<ReadEnds>();
};

}  // namespace

std::unique_ptr<RankSpawner> makeForkedSpawner(
    std::function<int(int rank, int resultFd)> rankMain) {
  return std::make_unique<ForkedSpawner>(std::move(rankMain));
}

}  // namespace ddph::launch
