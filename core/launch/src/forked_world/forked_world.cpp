#include "ddph/launch/forked_world.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "ddph/common/error.h"
#include "ddph/common/stop_signals.h"
#include "ddph/common/write_all.h"
#include "world_stop.h"

namespace ddph::launch {

using common::Error;
using common::restoreDefaultStopSignals;
using common::StopSignalScope;
using common::writeAll;

namespace {

using Clock = std::chrono::steady_clock;

void raiseFdLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

void writeLine(int fd, const std::string& line) {
  writeAll(fd, line + "\n");  // an error: the supervisor is gone, nothing to report to
}

namespace {

// One run of runForkedWorld: the ranks forked from this process, their result pipes, their
// reaping and the stop (NOTE [Stopping a world]).
class ForkedWorld {
 public:
  ForkedWorld(const ForkedWorldOptions& options, const RankMain& rankMain)
      : options_(options), rankMain_(rankMain), stop_(options.grace) {
    result_.ranks.resize(static_cast<std::size_t>(options.worldSize));
    readFds_.assign(static_cast<std::size_t>(options.worldSize), -1);
  }

  ForkedWorldResult run() {
    spawnAll();
    result_.spawnSeconds = since();
    while (alive_ > 0) {
      drain(true);
      reap();
      superviseStop();
    }
    result_.allReapedSeconds = since();
    // What the ranks wrote before exiting is still in the pipes.
    for (int round = 0; round < 100 && anyPipeOpen(); ++round) drain(false);
    closePipes();
    return std::move(result_);
  }

 private:
  double since() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void spawnAll() {
    std::fflush(nullptr);  // nothing buffered may be written twice
    try {
      for (int r = 0; r < options_.worldSize; ++r) spawn(r);
    } catch (...) {
      if (pgid_ != 0) ::killpg(pgid_, SIGKILL);
      while (alive_ > 0 && ::waitpid(-pgid_, nullptr, 0) > 0) --alive_;
      closePipes();
      throw;
    }
  }

  void spawn(int r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("pipe: {}", ::strerror(errno)));
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
      ::close(fds[0]);
      ::close(fds[1]);
      throw Error(fmt::format("fork of rank {}: {}", r, ::strerror(errno)));
    }
    if (pid == 0) runRank(r, fds, previousMask);
    if (pgid_ == 0) pgid_ = pid;
    ::setpgid(pid, pgid_);
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    readFds_[static_cast<std::size_t>(r)] = fds[0];
    result_.ranks[static_cast<std::size_t>(r)].rank = r;
    result_.ranks[static_cast<std::size_t>(r)].pid = pid;
    ++alive_;
  }

  // In the forked child: never returns.
  [[noreturn]] void runRank(int r, const int fds[2], const sigset_t& previousMask) {
    ::setpgid(0, pgid_);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent_) ::_exit(kRankInternalError);
    restoreDefaultStopSignals();
    ::pthread_sigmask(SIG_SETMASK, &previousMask, nullptr);
    ::close(fds[0]);
    for (int fd : readFds_) {
      if (fd >= 0) ::close(fd);  // the other ranks' result pipes
    }
    int code = kRankInternalError;
    try {
      code = rankMain_(r, fds[1]);
    } catch (...) {
    }
    ::_exit(code);  // no destructors, no atexit: they belong to the parent
  }

  // Reads what the ranks wrote to their result pipes (waiting up to 10 ms when `block`).
  void drain(bool block) {
    std::vector<pollfd> pfds;
    std::vector<int> owners;
    for (int r = 0; r < options_.worldSize; ++r) {
      if (readFds_[static_cast<std::size_t>(r)] >= 0) {
        pfds.push_back({readFds_[static_cast<std::size_t>(r)], POLLIN, 0});
        owners.push_back(r);
      }
    }
    if (pfds.empty()) {
      if (block) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    // A SIGINT or SIGTERM wakes the wait at once (until one has come: the pipe stays readable).
    if (signals_.received() == 0) pfds.push_back({signals_.fd(), POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), block ? 10 : 0) <= 0) return;
    for (std::size_t i = 0; i < owners.size(); ++i) {
      if (pfds[i].revents != 0) readPipe(owners[i]);
    }
  }

  void readPipe(int r) {
    int& fd = readFds_[static_cast<std::size_t>(r)];
    char buf[65536];
    while (true) {
      const ssize_t got = ::read(fd, buf, sizeof(buf));
      if (got > 0) {
        result_.ranks[static_cast<std::size_t>(r)].output.append(buf, static_cast<std::size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) {  // EOF: the rank is gone
        ::close(fd);
        fd = -1;
      }
      return;
    }
  }

  void reap() {
    while (true) {
      int status = 0;
      rusage usage{};
      const pid_t pid = ::wait4(-pgid_, &status, WNOHANG, &usage);
      if (pid <= 0) return;
      for (auto& r : result_.ranks) {
        if (r.pid == pid) ended(r, status, usage);
      }
    }
  }

  void ended(ForkedRank& r, int status, const rusage& usage) {
    r.exited = true;
    r.endSeconds = since();
    r.peakRssMb = static_cast<double>(usage.ru_maxrss) / 1024.0;
    if (WIFSIGNALED(status)) {
      r.signal = WTERMSIG(status);
      if (!stop_.endedByStop(r.signal)) r.stoppedByUs = false;  // NOTE [Stopping a world]
    } else {
      r.exitCode = WEXITSTATUS(status);
    }
    --alive_;
    const bool failed = r.signal != 0 || r.exitCode != 0;
    if (failed && !result_.firstFailure && !r.stoppedByUs) {
      result_.firstFailure = r.rank;
      result_.firstFailureSeconds = r.endSeconds;
    }
    if (failed) stop();
  }

  // The stop signals, the deadline and the grace.
  void superviseStop() {
    if (signals_.received() != 0 && result_.interruptedBy == 0) {
      result_.interruptedBy = signals_.received();
      stop();
    }
    if (!stop_.stopping() && Clock::now() - start_ > options_.deadline) {
      result_.deadlinePassed = true;
      stop();
    }
    stop_.killIfGraceOver(pgid_);
  }

  void stop() {
    if (stop_.stopping()) return;
    for (auto& r : result_.ranks) {
      if (r.pid != 0 && !r.exited) {
        r.stoppedByUs = true;
        r.wasStopped = inStopState(r.pid);
      }
    }
    stop_.begin(pgid_);
  }

  bool anyPipeOpen() const {
    for (int fd : readFds_) {
      if (fd >= 0) return true;
    }
    return false;
  }

  void closePipes() {
    for (int& fd : readFds_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  const ForkedWorldOptions& options_;
  const RankMain& rankMain_;
  StopSignalScope signals_;
  WorldStop stop_;
  ForkedWorldResult result_;
  std::vector<int> readFds_;
  const Clock::time_point start_ = Clock::now();
  const pid_t parent_ = ::getpid();
  pid_t pgid_ = 0;
  int alive_ = 0;
};

}  // namespace

ForkedWorldResult runForkedWorld(const ForkedWorldOptions& options, const RankMain& rankMain) {
  DDPH_CHECK(options.worldSize > 0, "world size must be positive, got {}", options.worldSize);
  raiseFdLimit();
  ForkedWorld world(options, rankMain);
  return world.run();
}

}  // namespace ddph::launch
