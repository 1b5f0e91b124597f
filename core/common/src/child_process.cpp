#include "ddph/common/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/env.hpp>
#include <boost/process/environment.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/search_path.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <thread>

#include "ddph/common/error.h"

namespace ddph::common {
namespace bp = boost::process;

std::string signalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

ExitStatus ExitStatus::fromWaitStatus(int status) {
  ExitStatus s;
  if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  } else {
    s.code = WEXITSTATUS(status);
  }
  return s;
}

std::string ExitStatus::describe() const {
  if (signal != 0) return fmt::format("was killed by signal {} ({})", signal, signalName(signal));
  return fmt::format("exited with code {}", code);
}

namespace {

// The descriptors the child's streams are wired to: this side's pipe ends and the child's.
struct Wiring {
  int child[3] = {-1, -1, -1};  // dup2'ed onto 0, 1, 2 in the child; -1: inherited
  int parent[3] = {-1, -1, -1};

  Wiring(const StreamTarget* targets[3]) {
    try {
      for (int s = 0; s < 3; ++s) wire(s, *targets[s]);
    } catch (...) {
      closeAll();
      throw;
    }
  }
  ~Wiring() { closeAll(); }
  Wiring(const Wiring&) = delete;
  Wiring& operator=(const Wiring&) = delete;

  void wire(int s, const StreamTarget& target) {
    switch (target.kind) {
      case StreamTarget::Kind::kInherit: return;
      case StreamTarget::Kind::kNull:
        child[s] = open("/dev/null", s == 0 ? O_RDONLY : O_WRONLY);
        return;
      case StreamTarget::Kind::kFile:
        child[s] = open(target.path, s == 0 ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC);
        return;
      case StreamTarget::Kind::kDescriptor:
        child[s] = ::fcntl(target.fd, F_DUPFD_CLOEXEC, 3);
        if (child[s] < 0) throw Error(fmt::format("cannot duplicate descriptor {}: {}", target.fd, ::strerror(errno)));
        return;
      case StreamTarget::Kind::kPipe: {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) {
          throw Error(fmt::format("cannot create a pipe: {}", ::strerror(errno)));
        }
        child[s] = s == 0 ? fds[0] : fds[1];
        parent[s] = s == 0 ? fds[1] : fds[0];
        return;
      }
    }
  }

  static int open(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, ::strerror(errno)));
    return fd;
  }

  void closeAll() {
    for (int s = 0; s < 3; ++s) {
      for (int* fd : {&child[s], &parent[s]}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
      }
    }
  }
};

// Runs in the forked child before exec; async-signal-safe calls only.
struct ChildSetup : bp::extend::handler {
  const int* streams = nullptr;
  pid_t group = 0;
  pid_t parent = 0;
  bool dieWithParent = true;

  template <class Executor>
  void on_exec_setup(Executor&) const {
    for (int s = 0; s < 3; ++s) {
      if (streams[s] < 0) continue;
      if (streams[s] == s) {
        ::fcntl(s, F_SETFD, 0);  // already in place: only keep it open across exec
      } else if (::dup2(streams[s], s) < 0) {
        ::_exit(127);
      }
    }
    ::setpgid(0, group);
    // Default actions and an empty mask: a parent that ignores or blocks SIGINT or SIGPIPE (a
    // test runner, nohup, a shell's background job) must not make the child immune to them.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    if (dieWithParent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died between fork and prctl
    }
  }
};

boost::filesystem::path resolveProgram(const std::string& program) {
  boost::filesystem::path path =
      program.find('/') == std::string::npos ? bp::search_path(program) : program;
  DDPH_CHECK(!path.empty() && ::access(path.c_str(), X_OK) == 0,
             "cannot run '{}': not found or not executable", program);
  return path;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, ChildOptions options) {
  DDPH_CHECK(!argv.empty(), "no command to run");
  const auto exe = resolveProgram(argv[0]);
  const std::vector<std::string> args(argv.begin() + 1, argv.end());
  const StreamTarget* targets[3] = {&options.in, &options.out, &options.err};
  Wiring wiring(targets);
  // A copy: `auto` would be this process's own environment, and the child's variables would
  // stay in it (setenv, racing every thread that reads the environment).
  bp::environment env = boost::this_process::environment();
  for (const auto& name : options.unsetEnv) env.erase(name);
  for (const auto& [name, value] : options.env) env[name] = value;
  ChildSetup setup;
  setup.streams = wiring.child;
  setup.group = options.processGroup;
  setup.parent = ::getpid();
  setup.dieWithParent = options.dieWithParent;
  std::error_code ec;
  bp::child child(exe, bp::args(args), env, setup, ec);
  if (ec) throw Error(fmt::format("cannot start '{}': {}", argv[0], ec.message()));
  pid_ = child.id();
  child.detach();  // reaped here, with waitpid, on every path
  group_ = options.processGroup != 0 ? options.processGroup : pid_;
  ::setpgid(pid_, group_);  // also from this side: no race with a kill of the group
  for (int s = 0; s < 3; ++s) {
    pipes_[s] = wiring.parent[s];
    wiring.parent[s] = -1;
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) kill();
  for (int& fd : pipes_) {
    if (fd >= 0) ::close(fd);
  }
}

int ChildProcess::takePipe(int stream) {
  DDPH_ASSERT(stream >= 0 && stream < 3);
  const int fd = pipes_[stream];
  pipes_[stream] = -1;
  return fd;
}

std::optional<ExitStatus> ChildProcess::poll() {
  if (pid_ < 0) return status_;
  int status = 0;
  pid_t done;
  while ((done = ::waitpid(pid_, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (done == pid_) {
    pid_ = -1;
    status_ = ExitStatus::fromWaitStatus(status);
  } else if (done < 0) {
    throw Error(fmt::format("waitpid({}): {}", pid_, ::strerror(errno)));
  }
  return status_;
}

std::optional<ExitStatus> ChildProcess::waitUntil(std::chrono::steady_clock::time_point deadline) {
  // NOTE [Reaping by polling waitpid]: poll waitpid(WNOHANG), never wait for a SIGCHLD (lost when
  // children end together); docs/design-notes.md#processes-one-child-type-one-signal-scope.
  while (!poll()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status_;
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

void ChildProcess::signalGroup(int sig) {
  if (group_ > 0) ::killpg(group_, sig);
}

ExitStatus ChildProcess::kill() {
  if (pid_ > 0) {
    signalGroup(SIGKILL);
    signal(SIGKILL);  // a child that left its group
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    status_ = ExitStatus::fromWaitStatus(status);
  }
  return *status_;
}

}  // namespace ddph::common
