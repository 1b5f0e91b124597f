"""The rule by which a world of ranks is stopped, ported once from the C++ supervisor's
(core/launch/src/world_stop.h, ``WorldStop``) for the ranks a Python launcher starts (the pytest
plugin's world, ddph_pytest/world.py).

NOTE [Stopping a world] (world_stop.h): on the first failure, the deadline or a stop signal, the
ranks' group gets SIGTERM, then SIGCONT (a rank stopped by SIGSTOP or a debugger acts on the SIGTERM
now, not at the SIGKILL), then SIGKILL once the grace has run out. A rank that ends of a SIGTERM,
or of a SIGKILL after the grace, was ended by the stop; one that ends of anything else while the
world is being stopped (its own SIGKILL, an OOM kill) died on its own and is named as such.

A world here may be several process groups (one per rank, each with its DataLoader workers): each
step signals every group. ``audit_python.world_stop`` (tests/test_world_stop.py) holds this to
the C++ rule's signals and grace and runs it on real processes.
"""

import os
import signal
import time

GRACE_S = 3.0  # between SIGTERM and SIGKILL: the supervisor's (SupervisorOptions::grace)
BEGIN_SIGNALS = (signal.SIGTERM, signal.SIGCONT)
KILL_SIGNAL = signal.SIGKILL


def signal_groups(groups, sig):
    """``sig`` to every process group of ``groups`` that still exists."""
    for group in groups:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone already


class WorldStop:
    """One world's stop, begun once; ``kill_at`` (time.monotonic) is when the grace runs out."""

    def __init__(self, grace_s=GRACE_S):
        self.grace_s = grace_s
        self.stopping = False
        self.kill_sent = False
        self.kill_at = None

    def begin(self, groups):
        """SIGTERM, then SIGCONT, to every group; the grace starts. Once only: False when the
        world was being stopped already."""
        if self.stopping:
            return False
        self.stopping = True
        self.kill_at = time.monotonic() + self.grace_s
        for sig in BEGIN_SIGNALS:
            signal_groups(groups, sig)
        return True

    def kill(self, groups):
        """SIGKILL to every group now, once (the grace ran out); True when sent now."""
        if not self.stopping or self.kill_sent:
            return False
        signal_groups(groups, KILL_SIGNAL)
        self.kill_sent = True
        return True

    def ended_by_stop(self, sig):
        """Whether a rank that ended of signal ``sig`` was ended by this stop."""
        return self.stopping and (sig == signal.SIGTERM or (sig == KILL_SIGNAL and self.kill_sent))

    def stopped(self, running_at_stop, sig):
        """Whether a rank ended because the world was stopped, not on its own: it was running
        when the stop began, and ended of no signal or of the stop's (SupervisedRank's
        ``stoppedByUs``)."""
        return running_at_stop and (sig == 0 or self.ended_by_stop(sig))


def in_stop_state(pid):
    """Whether ``pid`` is in the stop state (T: SIGSTOP, a debugger, a frozen job), from
    /proc/PID/stat: read before the stop's SIGCONT, it tells a stopped rank from a hung one."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            line = f.read()
    except OSError:
        return False
    close = line.rfind(")")  # the command name may hold spaces and parentheses
    return close >= 0 and line[close + 2:close + 3] in ("T", "t")
