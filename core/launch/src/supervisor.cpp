// The one rank supervisor (supervisor.h): Boost.Asio for the ranks' pipes, the deadline, the grace
// and the stop signals, all on one thread.
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <ostream>

#include "ddph/common/error.h"
#include "ddph/common/stop_signals.h"
#include "exit_hang.h"
#include "stop_watchdog.h"
#include "world_stop.h"

namespace ddph::launch {

using common::ConfigError;
using common::Error;
using common::StopSignalScope;

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// A rank's line is forwarded when its '\n' comes or when it reaches this length (a progress bar
// redrawn with '\r' for a whole epoch, binary written to stdout): then the part read so far goes
// out as a line of its own, so the supervisor's memory stays bounded and the output keeps flowing.
constexpr std::size_t kMaxLineBytes = 64 * 1024;

// NOTE [Reaping a large world]: a rank is polled (RankProcess::poll, a syscall) at once when all
// its pipes reached their end, then every tick until it is reaped; a sweep polls every rank every
// W × kSweepPerRank (at least every tick), for a rank whose pipes something it started holds
// open: polling 2048 ranks every tick would cost 200,000 syscalls a second. The pipes are read from
// once the last rank has started: what this process writes between two forks, the rank forked
// first keeps a copy of. docs/design-notes.md, "Scale: 2048 ranks on 2 cores".
constexpr std::chrono::milliseconds kTick{10};
constexpr std::chrono::microseconds kSweepPerRank{100};
// How long the pipes may stay open once every rank was reaped (held by what a rank started).
constexpr std::chrono::seconds kDrain{2};
// How often the ranks still running are asked whether they hung at exit (NOTE [Hung at exit]).
constexpr std::chrono::milliseconds kExitCheckEvery{500};

using Descriptor = asio::posix::stream_descriptor;

// One of a rank's output pipes, read line by line.
struct LineStream {
  std::unique_ptr<Descriptor> pipe;
  asio::streambuf buffer{kMaxLineBytes};
  std::ostream* sink = nullptr;
  bool open = false;
};

// Small, and only what spawn() needs is filled in before the last fork:
// NOTE [Reaping a large world].
struct Rank {
  ~Rank() {
    if (results) results->release();  // the RankProcess's to close
  }
  SupervisedRank seen;
  std::unique_ptr<RankProcess> process;  // destroyed after the descriptors below
  std::unique_ptr<LineStream> out;       // when the rank has that pipe
  std::unique_ptr<LineStream> err;
  std::unique_ptr<Descriptor> results;
  bool resultsOpen = false;
  bool watched = false;  // polled every tick: its pipes ended
  int openStreams() const {
    return int{out && out->open} + int{err && err->open} + int{resultsOpen};
  }
};

// A descriptor Asio may own and close (the scope keeps its own).
int duplicate(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw Error(fmt::format("cannot duplicate the signal pipe: {}", ::strerror(errno)));
  return copy;
}

}  // namespace

int SupervisedWorld::started() const {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(),
                                        [](const SupervisedRank& r) { return r.pid != 0; }));
}

class Supervisor::World {
 public:
  explicit World(SupervisorOptions options) : options_(std::move(options)) {
    if (options_.timeout) deadline_ = start_ + *options_.timeout;
    sweepEvery_ = std::max<Clock::duration>(kTick, kSweepPerRank * options_.worldSize);
  }

  const StopSignalScope& stopSignals() const { return stopSignals_; }
  std::optional<Clock::time_point> deadline() const { return deadline_; }

  SupervisedWorld run(RankSpawner& spawner) {
    signalPipe_.async_wait(Descriptor::wait_read, [this](const boost::system::error_code& ec) {
      if (!ec) interrupt(stopSignals_.received());
    });
    spawnAll(spawner);
    result_.spawnSeconds = since();
    scratch_.resize(64 * 1024);
    for (auto& rank : ranks_) watch(*rank);
    if (const int sig = stopSignals_.received(); sig != 0) interrupt(sig);  // while starting
    if (deadline_) {
      deadlineTimer_.expires_at(*deadline_);
      deadlineTimer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) stop(StopCause::kDeadline);
      });
    }
    // NOTE [Stuck output]: the ranks' lines are written on this thread, as a terminal takes them:
    // when this process's own stdout is not read (a stopped pager, a stuck log shipper), that
    // write waits, and with it the deadline, the grace and Ctrl-C, which run here too. The
    // watchdog keeps what matters from its own thread (started after the last fork): at the
    // deadline plus the grace, or the grace after a stop signal, every rank gets SIGKILL whatever
    // this thread is doing; this thread then records why (noticeWatchdog) once its write
    // returns, before it reaps anything. Nothing read is dropped. docs/design-notes.md.
    const pid_t group = group_;
    watchdog_.emplace(stopSignals_, deadline_, options_.grace, [group](int) {
      if (group != 0) ::killpg(group, SIGKILL);
    });
    if (running_ == 0) {
      allReaped();  // a stop signal came before the first rank
    } else {
      tick();
    }
    io_.run();
    watchdog_.reset();
    for (auto& rank : ranks_) result_.ranks.push_back(std::move(rank->seen));
    ranks_.clear();  // every descriptor released or closed, every RankProcess gone
    for (int r = static_cast<int>(result_.ranks.size()); r < options_.worldSize; ++r) {
      result_.ranks.emplace_back().rank = r;  // never started: the stop signal came first
    }
    return std::move(result_);
  }

 private:
  double since() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // Every rank of the world, until a stop signal comes. On an exception every rank started is
  // killed and reaped.
  void spawnAll(RankSpawner& spawner) {
    ranks_.reserve(static_cast<std::size_t>(options_.worldSize));
    try {
      for (int r = 0; r < options_.worldSize && stopSignals_.received() == 0; ++r) {
        spawn(spawner, r);
      }
    } catch (...) {
      if (group_ != 0) ::killpg(group_, SIGKILL);
      for (auto& rank : ranks_) rank->process->kill();
      ranks_.clear();
      throw;
    }
  }

  void spawn(RankSpawner& spawner, int r) {
    auto rank = std::make_unique<Rank>();
    rank->seen.rank = r;
    const EnvMap own = options_.rankEnvironment ? options_.rankEnvironment(r) : EnvMap{};
    try {
      rank->process = spawner.spawn(r, own, group_);  // the first rank leads the ranks' group
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw ConfigError(fmt::format("cannot start rank {}: {}", r, e.what()));
    }
    if (group_ == 0) group_ = rank->process->processGroup();
    rank->seen.pid = rank->process->pid();
    ranks_.push_back(std::move(rank));
    ++running_;
    if (options_.running) options_.running->store(running_);
  }

  // Reads the rank's pipes, once every rank was started: nothing is read while they start, and a
  // rank forked later does not copy what reading them takes.
  void watch(Rank& rank) {
    rank.out = openLines(rank, 1, options_.out);
    rank.err = openLines(rank, 2, options_.err);
    if (const int fd = rank.process->resultPipe(); fd >= 0) {
      rank.results = std::make_unique<Descriptor>(io_, fd);
      rank.results->non_blocking(true);
      rank.resultsOpen = true;
      ++openStreams_;
      readResults(rank);
    }
    if (rank.openStreams() == 0) rank.watched = true;  // nothing will tell when it ends
  }

  std::unique_ptr<LineStream> openLines(Rank& rank, int which, std::ostream* sink) {
    const int fd = rank.process->takePipe(which);
    if (fd < 0) return nullptr;
    auto stream = std::make_unique<LineStream>();
    stream->pipe = std::make_unique<Descriptor>(io_, fd);
    stream->sink = sink;
    stream->open = true;
    ++openStreams_;
    readLines(rank, *stream);
    return stream;
  }

  void readLines(Rank& rank, LineStream& stream) {
    asio::async_read_until(
        *stream.pipe, stream.buffer, '\n',
        [this, &rank, &stream](const boost::system::error_code& ec, std::size_t n) {
          if (!ec || ec == asio::error::not_found) {  // a line, or kMaxLineBytes without a '\n'
            const std::size_t take = ec ? stream.buffer.size() : n;
            std::string line(asio::buffers_begin(stream.buffer.data()),
                             asio::buffers_begin(stream.buffer.data()) + static_cast<long>(take));
            stream.buffer.consume(take);
            if (ec) line += '\n';
            emit(rank, stream, line);
            readLines(rank, stream);
            return;
          }
          if (stream.buffer.size() > 0) {  // a last line without '\n'
            std::string rest(asio::buffers_begin(stream.buffer.data()),
                             asio::buffers_end(stream.buffer.data()));
            stream.buffer.consume(stream.buffer.size());
            emit(rank, stream, rest + "\n");
          }
          stream.open = false;
          streamEnded(rank);
        });
  }

  void emit(const Rank& rank, const LineStream& stream, const std::string& line) {
    if (options_.onLine) options_.onLine(line);
    if (stream.sink) *stream.sink << "[rank" << rank.seen.rank << "]: " << line << std::flush;
  }

  void readResults(Rank& rank) {
    rank.results->async_wait(Descriptor::wait_read,
                             [this, &rank](const boost::system::error_code& ec) {
                               if (!ec && readAvailable(rank)) {
                                 readResults(rank);
                                 return;
                               }
                               rank.resultsOpen = false;
                               streamEnded(rank);
                             });
  }

  // What the rank's result pipe holds now; false at its end (or on an error: it is gone).
  bool readAvailable(Rank& rank) {
    while (true) {
      const ssize_t got = ::read(rank.results->native_handle(), scratch_.data(), scratch_.size());
      if (got > 0) {
        rank.seen.results.append(scratch_.data(), static_cast<std::size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }

  // A pipe of `rank` reached its end: when it was its last, the rank is ending.
  // NOTE [Reaping a large world].
  void streamEnded(Rank& rank) {
    --openStreams_;
    if (rank.openStreams() == 0 && !rank.seen.end && !rank.watched) {
      rank.watched = true;
      reap(rank);
    }
    if (running_ == 0 && openStreams_ == 0) {
      drainTimer_.cancel();  // done: nothing left on the io_context
      ticker_.cancel();
    }
  }

  void tick() {
    noticeWatchdog();
    const bool sweep = Clock::now() >= nextSweep_;
    if (sweep) nextSweep_ = Clock::now() + sweepEvery_;
    for (auto& rank : ranks_) {
      if (!rank->seen.end && (sweep || rank->watched)) reap(*rank);
    }
    if (running_ == 0) return;  // allReaped() took over
    if (options_.workDone && !stop_.stopping() && Clock::now() >= nextExitCheck_) checkExitHang();
    ticker_.expires_after(kTick);
    ticker_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) tick();
    });
  }

  // The watchdog fired while this thread was held (NOTE [Stuck output]): every rank has had its
  // SIGKILL already. Recorded before any rank is reaped, so that none counts as its own death.
  void noticeWatchdog() {
    const int why = watchdog_ ? watchdog_->fired() : 0;
    if (why == 0 || stop_.killSent()) return;
    if (why == StopWatchdog::kDeadline) {
      stop(StopCause::kDeadline);
    } else {
      interrupt(why);
    }
    stop_.markKilled();
  }

  // Reaps `rank` if it has ended; the stop rule (NOTE [Stopping a world]).
  void reap(Rank& rank) {
    noticeWatchdog();
    const auto status = rank.process->poll();
    if (!status) return;
    SupervisedRank& seen = rank.seen;
    seen.end = *status;
    seen.endSeconds = since();
    seen.peakRssMb = rank.process->peakRssMb();
    // A rank that died of its own SIGKILL (an OOM kill) while another's failure was being handled
    // is still its own death.
    seen.endedByStop = status->signal != 0 && stop_.endedByStop(status->signal);
    if (seen.failed() && !seen.stoppedByUs()) {
      if (!result_.firstFailure) result_.firstFailure = seen.rank;
      stop(StopCause::kFailure);
    }
    --running_;
    if (options_.running) options_.running->store(running_);
    if (running_ == 0) allReaped();
  }

  // NOTE [Hung at exit] (exit_hang.h): no rank failed (a failure stops the world), so the ranks
  // reaped exited 0; when every one still running has done its work and its main thread waited
  // in one futex wait over the settle time, they are ended as a stop ends ranks, each named hung
  // at exit.
  void checkExitHang() {
    const auto now = Clock::now();
    nextExitCheck_ = now + kExitCheckEvery;
    std::vector<Rank*> left;
    for (auto& rank : ranks_) {
      if (rank->seen.end) continue;
      if (!options_.workDone(rank->seen.rank, rank->seen.pid)) {
        exitHang_.reset();  // one rank still works: the others wait for it, not hung
        return;
      }
      left.push_back(rank.get());
    }
    bool allHung = !left.empty();
    for (Rank* rank : left) allHung = exitHang_.hung(rank->seen.pid, now) && allHung;
    if (!allHung) return;
    for (Rank* rank : left) rank->seen.hungAtExit = true;
    stop(StopCause::kHungAtExit);
  }

  // A rank's own children may still hold its pipes: the group goes, then the pipes drain.
  void allReaped() {
    result_.allReapedSeconds = since();
    if (group_ != 0) ::killpg(group_, SIGKILL);
    deadlineTimer_.cancel();
    graceTimer_.cancel();
    signalPipe_.cancel();
    ticker_.cancel();
    if (openStreams_ == 0) return;
    drainTimer_.expires_after(kDrain);
    drainTimer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      for (auto& rank : ranks_) {
        boost::system::error_code ignored;
        if (rank->out) rank->out->pipe->close(ignored);
        if (rank->err) rank->err->pipe->close(ignored);
        if (rank->results) rank->results->cancel(ignored);
      }
    });
  }

  void stop(StopCause cause) {
    if (stop_.stopping()) return;
    result_.stopCause = cause;
    for (auto& rank : ranks_) {  // before the stop's SIGCONT
      if (rank->seen.end) continue;
      rank->seen.runningAtStop = true;
      rank->seen.wasStopped = inStopState(rank->seen.pid);
    }
    if (!stop_.begin(group_)) return;
    graceTimer_.expires_at(stop_.killAt());
    graceTimer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) stop_.kill(group_);  // the timer is the grace: no second reading of the clock
    });
  }

  void interrupt(int sig) {
    if (result_.interruptedBy == 0) result_.interruptedBy = sig;
    stop(StopCause::kInterrupt);
  }

  SupervisorOptions options_;
  const Clock::time_point start_ = Clock::now();
  std::optional<Clock::time_point> deadline_;
  Clock::duration sweepEvery_;
  Clock::time_point nextSweep_{};
  Clock::time_point nextExitCheck_{};
  ExitHangWatch exitHang_{options_.exitSettle};
  asio::io_context io_;
  StopSignalScope stopSignals_;
  Descriptor signalPipe_{io_, duplicate(stopSignals_.fd())};
  asio::steady_timer ticker_{io_};
  asio::steady_timer deadlineTimer_{io_};
  asio::steady_timer graceTimer_{io_};
  asio::steady_timer drainTimer_{io_};
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<char> scratch_;  // 64 KiB, once every rank was started
  pid_t group_ = 0;
  int running_ = 0;
  int openStreams_ = 0;
  WorldStop stop_{options_.grace};        ///< NOTE [Stopping a world]
  std::optional<StopWatchdog> watchdog_;  ///< NOTE [Stuck output]
  SupervisedWorld result_;
};

Supervisor::Supervisor(SupervisorOptions options)
    : world_(std::make_unique<World>(std::move(options))) {}

Supervisor::~Supervisor() = default;

const StopSignalScope& Supervisor::stopSignals() const { return world_->stopSignals(); }

std::optional<std::chrono::steady_clock::time_point> Supervisor::deadline() const {
  return world_->deadline();
}

SupervisedWorld Supervisor::run(RankSpawner& spawner) { return world_->run(spawner); }

}  // namespace ddph::launch
