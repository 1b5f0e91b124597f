#pragma once
// SIGPIPE blocked in the calling thread for a scope: a write to a socket whose peer already left
// fails with EPIPE (which the caller reports as a ProtocolError) instead of killing the process.
// A SIGPIPE raised meanwhile (socket writes raise it in the writing thread) is consumed before the
// old mask comes back; one that was already pending before the scope is left alone. The process's
// signal dispositions are never changed: this is what libraries that write to sockets do.

#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace ddph::comm {

class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    pendingBefore_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~ScopedSigpipeBlock() {
    if (!pendingBefore_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec now{0, 0};
        ::sigtimedwait(&pipe_, nullptr, &now);
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool pendingBefore_ = false;
};

}  // namespace ddph::comm
