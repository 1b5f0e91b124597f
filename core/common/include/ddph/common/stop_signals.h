#pragma once
// SIGINT and SIGTERM recorded instead of acted on, for the life of a scope: how the forked world,
// the trainer and the launcher learn that the user asked them to stop, so that each can stop its
// ranks, write its checkpoint or report first.

namespace ddph::common {

/// While a StopSignalScope lives, SIGINT and SIGTERM only record themselves: received() returns
/// the last one, and fd() becomes readable (a self-pipe) so that a poll loop or a Boost.Asio
/// reactor wakes at once. The handlers that were installed before come back when it ends. One
/// scope at a time per process (a second one throws ddph::common::Error); not copyable. Interrupted
/// system calls are restarted (SA_RESTART): waits time out or see fd() instead of failing with
/// EINTR. A process forked inside a scope should restore the default actions
/// (restoreDefaultStopSignals) before it runs anything else.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;

  /// The last SIGINT or SIGTERM received in this scope, 0 while none.
  int received() const;

  /// Readable once a signal arrived (and stays readable: nothing drains it). Owned by the scope.
  int fd() const;
};

/// SIG_DFL for SIGINT and SIGTERM, and the scope's pipe closed: for a child forked inside a scope.
void restoreDefaultStopSignals();

}  // namespace ddph::common
