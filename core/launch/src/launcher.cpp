// The launcher: ChildProcess (Boost.Process) for spawning, Boost.Asio for the ranks' output, the deadlines and the
// signals, all on one thread.
#include "ddph/launch/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <iostream>
#include <memory>
#include <optional>

#include "ddph/common/child_process.h"
#include "ddph/common/error.h"
#include "ddph/common/stop_signals.h"
#include "ddph/launch/python_program.h"
#include "ddph/launch/rank_spawner.h"
#include "stop_watchdog.h"
#include "world_stop.h"

namespace ddph::launch {

using common::ConfigError;
using common::Error;
using common::ExitStatus;
using common::signalName;
using common::StopSignalScope;

namespace asio = boost::asio;

namespace {

// A rank's line is forwarded when its '\n' comes or when it reaches this length (a progress bar
// redrawn with '\r' for a whole epoch, binary written to stdout): then the part read so far goes out
// as a line of its own, so the launcher's memory stays bounded and the output keeps flowing.
constexpr std::size_t kMaxLineBytes = 64 * 1024;

struct OutputStream {
  std::unique_ptr<asio::posix::stream_descriptor> pipe;
  asio::streambuf buffer{kMaxLineBytes};
  std::ostream* sink = nullptr;
  bool open = true;
};

struct Rank {
  int rank = 0;
  std::unique_ptr<RankProcess> process;
  OutputStream out;
  OutputStream err;
  RankOutcome outcome;
};

// Whether a rank's output line says `port` was in use when its store bound it (torch's TCPStore:
// "The server socket has failed to bind to [::]:40599 (errno: 98 - Address already in use)").
bool reportsPortTaken(const std::string& line, std::uint16_t port) {
  return line.find("Address already in use") != std::string::npos &&
         line.find(":" + std::to_string(port)) != std::string::npos;
}

// The variables only one rank has; every other one is the launch's common environment.
const std::vector<std::string> kPerRankVariables = {"RANK", "LOCAL_RANK"};

// A descriptor Asio may own and close (the scope keeps its own).
int duplicate(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw Error(fmt::format("cannot duplicate the signal pipe: {}", ::strerror(errno)));
  return copy;
}

class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options) : options_(options) {}

  LaunchResult run() {
    result_.masterPort =
        options_.masterPort != 0 ? options_.masterPort : findFreePort(options_.masterAddr);
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (options_.timeout) deadline = std::chrono::steady_clock::now() + *options_.timeout;
    spawner_ = chooseSpawner(deadline);
    signalPipe_.async_wait(asio::posix::stream_descriptor::wait_read,
                           [this](const boost::system::error_code& ec) {
                             if (!ec) interrupt(stopSignals_.received());
                           });
    try {
      for (int r = 0; r < options_.numRanks && stopSignals_.received() == 0; ++r) spawn(r);
    } catch (...) {
      killGroup(SIGKILL);
      reapAll();
      throw;
    }
    if (const int sig = stopSignals_.received(); sig != 0) interrupt(sig);  // while starting
    if (deadline) {
      deadline_.expires_at(*deadline);
      deadline_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) timedOut();
      });
    }
    // NOTE [Stuck output]: the ranks' lines are written on this thread, as a terminal takes them:
    // when the launcher's own stdout is not read (a stopped pager, a stuck log shipper), that write
    // waits, and with it the deadline, the grace and Ctrl-C, which run here too. The watchdog keeps
    // what matters from its own thread: at the deadline plus the grace, or the grace after a stop
    // signal, every rank gets SIGKILL whatever this thread is doing; this thread then records why
    // (poll) once its write returns. Nothing read is dropped. docs/design-notes.md.
    const pid_t group = pgid_;
    watchdog_.emplace(stopSignals_, deadline, options_.grace,
                      [group](int) { ::killpg(group, SIGKILL); });
    poll();
    io_.run();
    watchdog_.reset();
    finish();
    return std::move(result_);
  }

 private:
  // What every rank's environment holds but its own RANK and LOCAL_RANK.
  EnvMap commonEnvironment() const {
    EnvMap env;
    for (const auto& [name, value] : options_.extraEnv) env[name] = value;
    env["WORLD_SIZE"] = std::to_string(options_.numRanks);
    env["LOCAL_WORLD_SIZE"] = std::to_string(options_.numRanks);
    env["GROUP_RANK"] = "0";
    env["TORCHELASTIC_RESTART_COUNT"] = "0";  // one attempt: never an inherited restart count
    env["TORCHELASTIC_MAX_RESTARTS"] = "0";
    env["MASTER_ADDR"] = options_.masterAddr;
    env["MASTER_PORT"] = std::to_string(result_.masterPort);
    return env;
  }

  // A fork server for a Python program when one was asked for and can fork; else exec'd ranks,
  // with one line saying why when the program is Python.
  std::unique_ptr<RankSpawner> chooseSpawner(
      std::optional<std::chrono::steady_clock::time_point> worldDeadline) {
    EnvMap common = commonEnvironment();
    if (!options_.forkServer.empty()) {
      std::string whyNot;
      if (const auto server = forkServerCommand(options_.command, options_.forkServer)) {
        whyNot = server->whyNot;
        if (whyNot.empty()) {
          auto ready = std::chrono::steady_clock::now() + options_.forkServerReady;
          if (worldDeadline) ready = std::min(ready, *worldDeadline);
          ForkServerStart start =
              startForkServer(server->argv, common, kPerRankVariables, ready, stopSignals_.fd());
          if (start.spawner) return std::move(start.spawner);
          whyNot = start.whyNot;
        }
      }
      if (!whyNot.empty() && options_.note && stopSignals_.received() == 0) {
        options_.note(fmt::format("each rank execs the program ({})", whyNot));
      }
    }
    return makeExecSpawner(options_.command, std::move(common));
  }

  void spawn(int r) {
    auto rank = std::make_unique<Rank>();
    rank->rank = r;
    rank->out.sink = options_.out ? options_.out : &std::cout;
    rank->err.sink = options_.err ? options_.err : &std::cerr;
    const EnvMap own = {{"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}};
    try {
      rank->process = spawner_->spawn(r, own, pgid_);  // the first rank leads the ranks' group
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw ConfigError(fmt::format("cannot start rank {}: {}", r, e.what()));
    }
    if (pgid_ == 0) pgid_ = rank->process->processGroup();
    rank->out.pipe = std::make_unique<asio::posix::stream_descriptor>(io_, rank->process->takePipe(1));
    rank->err.pipe = std::make_unique<asio::posix::stream_descriptor>(io_, rank->process->takePipe(2));
    rank->outcome.rank = r;
    rank->outcome.pid = rank->process->pid();
    read(*rank, rank->out);
    read(*rank, rank->err);
    ranks_.push_back(std::move(rank));
  }

  void read(Rank& rank, OutputStream& stream) {
    asio::async_read_until(
        *stream.pipe, stream.buffer, '\n',
        [this, &rank, &stream](const boost::system::error_code& ec, std::size_t n) {
          if (!ec) {
            std::string line(asio::buffers_begin(stream.buffer.data()),
                             asio::buffers_begin(stream.buffer.data()) + static_cast<long>(n));
            stream.buffer.consume(n);
            emit(rank, stream, line);
            read(rank, stream);
            return;
          }
          if (ec == asio::error::not_found) {  // kMaxLineBytes without a '\n'
            const std::string part(asio::buffers_begin(stream.buffer.data()),
                                   asio::buffers_end(stream.buffer.data()));
            stream.buffer.consume(stream.buffer.size());
            emit(rank, stream, part + "\n");
            read(rank, stream);
            return;
          }
          if (stream.buffer.size() > 0) {  // a last line without '\n'
            std::string rest(asio::buffers_begin(stream.buffer.data()),
                             asio::buffers_end(stream.buffer.data()));
            stream.buffer.consume(stream.buffer.size());
            emit(rank, stream, rest + "\n");
          }
          stream.open = false;
          maybeDone();
        });
  }

  void emit(const Rank& rank, OutputStream& stream, const std::string& line) {
    if (!result_.portTaken && reportsPortTaken(line, result_.masterPort)) result_.portTaken = true;
    *stream.sink << "[rank" << rank.rank << "]: " << line << std::flush;
  }

  // Reaps exited ranks every few milliseconds (no SIGCHLD handler: nothing global to restore).
  void poll() {
    if (const int why = watchdog_ ? watchdog_->fired() : 0; why != 0 && !stop_.killSent()) {
      // This thread was held (NOTE [Stuck output]): the watchdog has killed every rank already.
      if (why == StopWatchdog::kDeadline) {
        timedOut();
      } else {
        interrupt(why);
      }
      stop_.markKilled();
    }
    for (auto& rank : ranks_) {
      if (rank->outcome.kind != RankOutcome::Kind::kRunning) continue;
      const auto status = rank->process->poll();
      if (!status) continue;
      if (status->signal != 0) {
        // NOTE [Stopping a world]: a rank that died of its own SIGKILL (an OOM kill) while
        // another's failure was being handled in the same poll is still its own death.
        const int sig = status->signal;
        rank->outcome.kind =
            stop_.endedByStop(sig) ? RankOutcome::Kind::kStopped : RankOutcome::Kind::kSignaled;
        rank->outcome.signal = sig;
      } else {
        rank->outcome.kind = RankOutcome::Kind::kExited;
        rank->outcome.code = status->code;
      }
      const bool failed = rank->outcome.kind == RankOutcome::Kind::kSignaled ||
                          (rank->outcome.kind == RankOutcome::Kind::kExited && rank->outcome.code != 0);
      if (failed && !stop_.stopping()) {
        result_.failure = rank->outcome;
        stop();
      }
    }
    if (allExited()) {
      // A rank's own children may still hold its pipes: the group goes, then the pipes drain.
      killGroup(SIGKILL);
      deadline_.cancel();
      grace_.cancel();
      signalPipe_.cancel();
      if (!pipesOpen()) return;  // done: nothing left on the io_context
      if (!drainTimerSet_) {
        drainTimerSet_ = true;
        drain_.expires_after(std::chrono::seconds(2));
        drain_.async_wait([this](const boost::system::error_code& ec) {
          if (!ec) closePipes();
        });
      }
      return;
    }
    ticker_.expires_after(std::chrono::milliseconds(10));
    ticker_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) poll();
    });
  }

  bool allExited() const {
    for (const auto& rank : ranks_) {
      if (rank->outcome.kind == RankOutcome::Kind::kRunning) return false;
    }
    return true;
  }

  bool pipesOpen() const {
    for (const auto& rank : ranks_) {
      if (rank->out.open || rank->err.open) return true;
    }
    return false;
  }

  void maybeDone() {
    if (!allExited() || pipesOpen()) return;
    drain_.cancel();
    ticker_.cancel();
  }

  void closePipes() {
    for (auto& rank : ranks_) {
      boost::system::error_code ec;
      rank->out.pipe->close(ec);
      rank->err.pipe->close(ec);
    }
  }

  void stop() {
    if (stop_.stopping()) return;
    for (auto& rank : ranks_) {  // before the stop's SIGCONT
      if (rank->outcome.kind == RankOutcome::Kind::kRunning) {
        rank->outcome.wasStopped = inStopState(rank->outcome.pid);
      }
    }
    if (!stop_.begin(pgid_)) return;
    grace_.expires_at(stop_.killAt());
    grace_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) stop_.kill(pgid_);  // the timer is the grace: no second reading of the clock
    });
  }

  void interrupt(int sig) {
    if (result_.interruptedBy == 0) result_.interruptedBy = sig;
    stop();
  }

  void timedOut() {
    for (auto& rank : ranks_) {
      if (rank->outcome.kind != RankOutcome::Kind::kRunning) continue;
      if (!result_.failure) {
        result_.failure = rank->outcome;
        result_.failure->kind = RankOutcome::Kind::kTimedOut;
      }
    }
    stop();
  }

  void killGroup(int sig) {
    if (pgid_ != 0) ::killpg(pgid_, sig);
  }

  void reapAll() {
    for (auto& rank : ranks_) rank->process->kill();
  }

  void finish() {
    for (auto& rank : ranks_) result_.ranks.push_back(rank->outcome);
    if (result_.interruptedBy != 0) {
      result_.exitCode = 128 + result_.interruptedBy;
      result_.summary = fmt::format("interrupted by {}: stopped all {} ranks",
                                    signalName(result_.interruptedBy), ranks_.size());
    } else if (result_.failure) {
      result_.exitCode = 1;
      const int others = static_cast<int>(ranks_.size()) - 1;
      if (result_.failure->kind == RankOutcome::Kind::kTimedOut) {
        result_.summary = fmt::format("{} of {} s; stopped every rank",
                                      describeOutcome(*result_.failure),
                                      static_cast<double>(options_.timeout->count()) / 1000.0);
      } else {
        result_.summary = fmt::format("{}; stopped the other {} rank{}",
                                      describeOutcome(*result_.failure), others,
                                      others == 1 ? "" : "s");
      }
    } else {
      result_.exitCode = 0;
      result_.summary = fmt::format("all {} ranks exited with code 0", ranks_.size());
    }
  }

  const LaunchOptions& options_;
  asio::io_context io_;
  StopSignalScope stopSignals_;
  asio::posix::stream_descriptor signalPipe_{io_, duplicate(stopSignals_.fd())};
  asio::steady_timer ticker_{io_};
  asio::steady_timer deadline_{io_};
  asio::steady_timer grace_{io_};
  asio::steady_timer drain_{io_};
  bool drainTimerSet_ = false;
  std::unique_ptr<RankSpawner> spawner_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  pid_t pgid_ = 0;
  WorldStop stop_{options_.grace};  ///< NOTE [Stopping a world]
  std::optional<StopWatchdog> watchdog_;  ///< NOTE [Stuck output]
  LaunchResult result_;
};

}  // namespace

std::string describeOutcome(const RankOutcome& o) {
  const std::string who = fmt::format("rank {} (pid {})", o.rank, o.pid);
  switch (o.kind) {
    case RankOutcome::Kind::kRunning: return who + " is running";
    case RankOutcome::Kind::kExited: return fmt::format("{} exited with code {}", who, o.code);
    case RankOutcome::Kind::kSignaled:
      return fmt::format("{} {}", who, ExitStatus{0, o.signal}.describe());
    case RankOutcome::Kind::kTimedOut: return who + " was still running at the timeout";
    case RankOutcome::Kind::kStopped:
      return fmt::format("{} was stopped ({})", who, signalName(o.signal));
  }
  return who;
}

LaunchResult launchRanks(const LaunchOptions& options) {
  DDPH_CHECK(options.numRanks > 0, "the number of ranks must be positive, got {}",
             options.numRanks);
  DDPH_CHECK(!options.command.empty(), "no command to launch (ddp-sim launch -n W -- CMD ARGS…)");
  LaunchResult result = Supervisor(options).run();
  if (!options.retryTakenPort || !result.portTaken || result.exitCode == 0 || result.interruptedBy != 0) {
    return result;
  }
  LaunchOptions again = options;
  again.retryTakenPort = false;
  do {
    again.masterPort = findFreePort(options.masterAddr);
  } while (again.masterPort == result.masterPort);
  if (options.note) {
    options.note(fmt::format("MASTER_PORT {} was taken before rank 0's store could bind it; running "
                             "the ranks once more on port {}",
                             result.masterPort, again.masterPort));
  }
  if (options.beforeRetry) options.beforeRetry();
  return Supervisor(again).run();
}

}  // namespace ddph::launch
