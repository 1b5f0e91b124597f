#include "ddph/launch/forked_world.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
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

namespace ddph {
namespace {

using Clock = std::chrono::steady_clock;

void raiseFdLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// Whether `pid` is stopped (state T: SIGSTOP, a debugger, a frozen job), from /proc/PID/stat.
bool isStopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'T' || line[close + 2] == 't');
}

}  // namespace

SharedProgress::SharedProgress(int worldSize) : worldSize_(worldSize) {
  bytes_ = sizeof(Slot) * static_cast<std::size_t>(worldSize);
  memory_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory_ == MAP_FAILED) throw Error(fmt::format("mmap: {}", ::strerror(errno)));
  auto* slots = static_cast<Slot*>(memory_);
  for (int r = 0; r < worldSize; ++r) new (&slots[r]) Slot();
}

SharedProgress::~SharedProgress() {
  if (memory_ != nullptr && memory_ != MAP_FAILED) ::munmap(memory_, bytes_);
}

SharedProgress::Slot& SharedProgress::slot(int rank) {
  DDPH_ASSERT(rank >= 0 && rank < worldSize_);
  return static_cast<Slot*>(memory_)[rank];
}

void writeLine(int fd, const std::string& line) {
  writeAll(fd, line + "\n");  // an error: the supervisor is gone, nothing to report to
}

ForkedWorldResult runForkedWorld(const ForkedWorldOptions& options, const RankMain& rankMain) {
  DDPH_CHECK(options.worldSize > 0, "world size must be positive, got {}", options.worldSize);
  const int w = options.worldSize;
  raiseFdLimit();
  SharedProgress progress(w);
  StopSignalScope signals;
  ForkedWorldResult result;
  result.ranks.resize(static_cast<std::size_t>(w));
  std::vector<int> readFds(static_cast<std::size_t>(w), -1);
  const auto start = Clock::now();
  const auto since = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const pid_t parent = ::getpid();
  pid_t pgid = 0;
  int alive = 0;
  bool stopping = false;
  bool killSent = false;
  Clock::time_point killAt{};

  const auto stop = [&] {
    if (stopping) return;
    stopping = true;
    for (auto& r : result.ranks) {
      if (r.pid != 0 && !r.exited) {
        r.stoppedByUs = true;
        r.wasStopped = isStopped(r.pid);
      }
    }
    if (pgid != 0) {
      ::killpg(pgid, SIGTERM);
      ::killpg(pgid, SIGCONT);  // a stopped rank acts on the SIGTERM now, not at the SIGKILL
    }
    killAt = Clock::now() + options.grace;
  };

  std::fflush(nullptr);  // nothing buffered may be written twice
  try {
    for (int r = 0; r < w; ++r) {
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
      if (pid == 0) {
        ::setpgid(0, pgid);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(kRankInternalError);
        restoreDefaultStopSignals();
        ::pthread_sigmask(SIG_SETMASK, &previousMask, nullptr);
        ::close(fds[0]);
        for (int fd : readFds) {
          if (fd >= 0) ::close(fd);  // the other ranks' result pipes
        }
        int code = kRankInternalError;
        try {
          code = rankMain(r, fds[1], progress);
        } catch (...) {
        }
        ::_exit(code);  // no destructors, no atexit: they belong to the parent
      }
      if (pgid == 0) pgid = pid;
      ::setpgid(pid, pgid);
      ::close(fds[1]);
      ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
      readFds[static_cast<std::size_t>(r)] = fds[0];
      result.ranks[static_cast<std::size_t>(r)].rank = r;
      result.ranks[static_cast<std::size_t>(r)].pid = pid;
      ++alive;
    }
  } catch (...) {
    if (pgid != 0) ::killpg(pgid, SIGKILL);
    while (alive > 0 && ::waitpid(-pgid, nullptr, 0) > 0) --alive;
    for (int fd : readFds) {
      if (fd >= 0) ::close(fd);
    }
    throw;
  }
  result.spawnSeconds = since();

  std::vector<pollfd> pfds;
  const auto drain = [&](bool block) {
    pfds.clear();
    std::vector<int> owners;
    for (int r = 0; r < w; ++r) {
      if (readFds[static_cast<std::size_t>(r)] >= 0) {
        pfds.push_back({readFds[static_cast<std::size_t>(r)], POLLIN, 0});
        owners.push_back(r);
      }
    }
    if (pfds.empty()) {
      if (block) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    // A SIGINT or SIGTERM wakes the wait at once (until one has come: the pipe stays readable).
    if (signals.received() == 0) pfds.push_back({signals.fd(), POLLIN, 0});
    const int n = ::poll(pfds.data(), pfds.size(), block ? 10 : 0);
    if (n <= 0) return;
    char buf[65536];
    for (std::size_t i = 0; i < owners.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      const int r = owners[i];
      while (true) {
        const ssize_t got = ::read(pfds[i].fd, buf, sizeof(buf));
        if (got > 0) {
          result.ranks[static_cast<std::size_t>(r)].output.append(buf, static_cast<std::size_t>(got));
          continue;
        }
        if (got < 0 && (errno == EINTR)) continue;
        if (got == 0) {  // EOF: the rank is gone
          ::close(pfds[i].fd);
          readFds[static_cast<std::size_t>(r)] = -1;
        }
        break;
      }
    }
  };

  while (alive > 0) {
    drain(true);
    while (true) {
      int status = 0;
      rusage usage{};
      const pid_t pid = ::wait4(-pgid, &status, WNOHANG, &usage);
      if (pid <= 0) break;
      for (auto& r : result.ranks) {
        if (r.pid != pid) continue;
        r.exited = true;
        r.endSeconds = since();
        r.peakRssMb = static_cast<double>(usage.ru_maxrss) / 1024.0;
        if (WIFSIGNALED(status)) {
          r.signal = WTERMSIG(status);
          // Only a SIGTERM, or a SIGKILL once the grace has passed, is the supervisor's: a rank that
          // died of anything else while the world was being stopped (its own SIGKILL, an OOM kill
          // still tearing the process down when a peer that saw its sockets close was reaped first)
          // died on its own.
          if (r.signal != SIGTERM && !(r.signal == SIGKILL && killSent)) r.stoppedByUs = false;
        } else {
          r.exitCode = WEXITSTATUS(status);
        }
        --alive;
        const bool failed = r.signal != 0 || r.exitCode != 0;
        if (failed && !result.firstFailure && !r.stoppedByUs) {
          result.firstFailure = r.rank;
          result.firstFailureSeconds = r.endSeconds;
        }
        if (failed) stop();
      }
    }
    if (signals.received() != 0 && result.interruptedBy == 0) {
      result.interruptedBy = signals.received();
      stop();
    }
    if (!stopping && Clock::now() - start > options.deadline) {
      result.deadlinePassed = true;
      stop();
    }
    if (stopping && Clock::now() > killAt) {
      ::killpg(pgid, SIGKILL);
      killSent = true;
    }
  }
  result.allReapedSeconds = since();
  for (auto& r : result.ranks) {
    r.lastEpoch = progress.slot(r.rank).epoch.load();
    r.lastStep = progress.slot(r.rank).step.load();
    r.wasWaiting = progress.slot(r.rank).waiting.load() != 0;
  }
  // What the ranks wrote before exiting is still in the pipes.
  for (int round = 0; round < 100; ++round) {
    bool open = false;
    for (int fd : readFds) open = open || fd >= 0;
    if (!open) break;
    drain(false);
  }
  for (int fd : readFds) {
    if (fd >= 0) ::close(fd);
  }
  return result;
}

}  // namespace ddph
