"""The parent's side of a distributed test: fork W ranks, wait for them with a deadline, stop them.

Rank 0 is forked first; it serves the TCPStore and sends its port, then ranks 1..W-1 are forked
with it. Each rank has a pipe (its messages: the port, its result) and a pidfd (readable when it
exits); one selector waits on all of them until every rank has exited or the deadline passes. When
a rank fails (a failed body, an exit without a result), the others are stopped at once, as PyTorch's
MultiProcessTestCase does: a peer waiting for it in a collective would otherwise wait until the
deadline. Before a rank is stopped its Python stacks are dumped (SIGUSR1, faulthandler) so the
failure can say where it was blocked; then the ranks are stopped by the one rule of the harness's
supervisor (ddph_launch/world_stop.py: SIGTERM and SIGCONT to each rank's process group, SIGKILL
after the grace), each rank named by how it ended. Every rank is reaped, and its process group
(its DataLoader workers) killed, before ``run`` returns, whatever happens (a KeyboardInterrupt,
pytest-timeout's exception); ``launch.json`` then tells the audit how each rank ended
(ddph_audit/launch_record.py, docs/trace-format.md).
"""

import fcntl
import gc
import json
import os
import selectors
import signal
import sys
import time

from ddph_audit.launch_record import launch_record, rank_entry, write_launch_record
from ddph_launch import world_stop

from . import rank_process

STACK_DUMP_WAIT_S = 3.0  # how long the dumps of the ranks being stopped may take, all together


class WorldSpec:
    """One distributed test's world: its size, limits and the files in its private folder."""

    def __init__(self, world_size, timeout, backend, cpu, audit, folder, run_id):
        self.world_size = world_size
        self.timeout = timeout
        self.backend = backend
        self.cpu = cpu
        self.audit = audit
        self.folder = folder
        self.run_id = run_id
        self.parent_pid = os.getpid()
        self.trace_dir = os.path.join(folder, "trace")

    def stdout_path(self, rank):
        return os.path.join(self.folder, "rank-%d.stdout" % rank)

    def stderr_path(self, rank):
        return os.path.join(self.folder, "rank-%d.stderr" % rank)

    def stack_path(self, rank):
        return os.path.join(self.folder, "rank-%d.stacks" % rank)

    def report_path(self):
        """Where ddp-sim audit writes its JSON report (audit_run.py)."""
        return os.path.join(self.folder, "audit.json")


class RankProcess:
    """A forked rank as the parent sees it: outcome is running, exited, signaled, timed-out or
    stopped (by the parent after another rank failed), as in launch.json."""

    def __init__(self, rank, pid, pipe_r, pidfd):
        self.rank = rank
        self.pid = pid
        self.pipe_r = pipe_r
        self.pidfd = pidfd
        self.buffer = b""
        self.port = None
        self.result = None
        self.start_error = None
        self.outcome = "running"
        self.code = 0
        self.signal = 0
        self.running_at_stop = False  # not reaped yet when the world's stop began
        self.was_stopped = False  # in the stop state (T) then

    @property
    def running(self):
        return self.outcome == "running"

    @property
    def failed(self):
        """Ended and did not pass: an error in its body, no result, or an exit that is not 0."""
        if self.running or self.outcome == "stopped":
            return False
        if self.result is None or self.outcome != "exited" or self.code != 0:
            return True
        return bool(self.result["failures"])

    def read_messages(self):
        """Reads what the pipe holds now (non-blocking); False at its end."""
        while True:
            try:
                chunk = os.read(self.pipe_r, 65536)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            self.buffer += chunk
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                self._take(json.loads(line.decode("utf-8")))

    def _take(self, message):
        if "port" in message:
            self.port = message["port"]
        elif "result" in message:
            self.result = message["result"]
        elif "start_error" in message:
            self.start_error = message["start_error"]


class WorldOutcome:
    def __init__(self, ranks, timed_out, elapsed_s):
        self.ranks = ranks
        self.timed_out = timed_out
        self.elapsed_s = elapsed_s


def _fork(item, spec, rank, port, others):
    pipe_r, pipe_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:  # the rank
        os.close(pipe_r)
        for other in others:
            os.close(other.pipe_r)
            os.close(other.pidfd)
        rank_process.run(item, spec, rank, port, pipe_w)  # never returns
    os.close(pipe_w)
    try:
        os.setpgid(pid, pid)  # as the rank does itself: its group exists from here on
    except OSError:
        pass  # it made its group first, or is gone
    fcntl.fcntl(pipe_r, fcntl.F_SETFL, fcntl.fcntl(pipe_r, fcntl.F_GETFL) | os.O_NONBLOCK)
    return RankProcess(rank, pid, pipe_r, os.pidfd_open(pid))


def _reap(r):
    """Waits for an exited (or killed) rank and sets how it ended."""
    _, status = os.waitpid(r.pid, 0)
    r.read_messages()
    if os.WIFSIGNALED(status):
        r.signal = os.WTERMSIG(status)
    else:
        r.code = os.waitstatus_to_exitcode(status)
    r.outcome = "signaled" if os.WIFSIGNALED(status) else "exited"


def _reap_by(ranks, deadline):
    """Reaps the ranks that end before ``deadline`` (time.monotonic); the others run on."""
    with selectors.DefaultSelector() as sel:
        for r in ranks:
            if r.running:
                sel.register(r.pidfd, selectors.EVENT_READ, r)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for key, _ in sel.select(timeout=left):
                sel.unregister(key.fileobj)
                _reap(key.data)


def _dump_stacks(spec, ranks):
    """Asks each rank for its Python stacks (faulthandler on SIGUSR1) and waits, within
    STACK_DUMP_WAIT_S, until each rank's dump has stopped growing."""
    sizes = {}
    for r in ranks:
        try:
            os.kill(r.pid, signal.SIGUSR1)
            sizes[r.rank] = -1
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STACK_DUMP_WAIT_S
    while sizes and time.monotonic() < deadline:
        time.sleep(0.05)
        for rank in list(sizes):
            try:
                size = os.path.getsize(spec.stack_path(rank))
            except OSError:
                size = 0
            if size > 0 and size == sizes[rank]:
                del sizes[rank]
            else:
                sizes[rank] = size


def _groups(ranks):
    """The ranks' process groups (each rank leads its own, with its DataLoader workers): while
    the world's pidfds are open, no group id is another process's."""
    return [r.pid for r in ranks]


def _stop(spec, ranks, timed_out, stacks=True):
    """Stops the ranks still running by the one rule (world_stop.py), after asking each for its
    stacks, and names each by how it ended: ``timed-out`` (the deadline) or ``stopped`` when the
    stop ended it, as it ended otherwise."""
    running = [r for r in ranks if r.running]
    if not running:
        return
    for r in running:  # before the stop's SIGCONT
        r.running_at_stop = True
        r.was_stopped = world_stop.in_stop_state(r.pid)
    if stacks:
        _dump_stacks(spec, running)
    stop = world_stop.WorldStop()
    stop.begin(_groups(ranks))
    _reap_by(running, stop.kill_at)
    if any(r.running for r in running):
        stop.kill(_groups(ranks))
        for r in running:
            if r.running:
                _reap(r)
    for r in running:
        if stop.stopped(r.running_at_stop, r.signal):
            r.outcome = "timed-out" if timed_out else "stopped"


def _wait(spec, ranks, deadline, until_port=False):
    """Waits for the ranks' messages and exits. Returns "done", "port", "failed" or "timeout"."""
    with selectors.DefaultSelector() as sel:
        for r in ranks:
            if r.running:
                sel.register(r.pidfd, selectors.EVENT_READ, ("exit", r))
                sel.register(r.pipe_r, selectors.EVENT_READ, ("pipe", r))
        while any(r.running for r in ranks):
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            for key, _ in sel.select(timeout=left):
                kind, r = key.data
                if kind == "pipe":
                    if not r.read_messages():
                        sel.unregister(r.pipe_r)
                    if until_port and r.port is not None:
                        return "port"
                    continue
                sel.unregister(r.pidfd)
                if r.pipe_r in sel.get_map():
                    sel.unregister(r.pipe_r)
                _reap(r)
                if r.failed:
                    return "failed"
    return "done"


def _write_launch_record(spec, ranks, timed_out):
    """launch.json, as ddp-sim launch writes it: the audit reads how each rank ended."""
    failed = any(r.failed for r in ranks) or timed_out
    write_launch_record(spec.trace_dir, launch_record(
        "ddph_pytest", spec.world_size, 1 if failed else 0, timed_out,
        [rank_entry(r.rank, r.pid, r.outcome, r.code, r.signal, r.was_stopped) for r in ranks]))


def run(item, spec):
    """Runs the world to its end; every rank has exited and been reaped when this returns.

    The parent's objects are frozen out of the garbage collector meanwhile (``gc.freeze``): a
    collection in a rank would otherwise touch every object it inherited and copy its page."""
    gc.freeze()
    try:
        return _run(item, spec)
    finally:
        gc.unfreeze()


def _run(item, spec):
    start = time.monotonic()
    deadline = start + spec.timeout
    ranks = []
    timed_out = False
    try:
        ranks.append(_fork(item, spec, 0, None, ranks))
        state = _wait(spec, ranks, deadline, until_port=True)
        if state == "port":
            for rank in range(1, spec.world_size):
                ranks.append(_fork(item, spec, rank, ranks[0].port, ranks))
            state = _wait(spec, ranks, deadline)
        timed_out = state == "timeout"
        _stop(spec, ranks, timed_out)
    finally:
        _stop(spec, ranks, False, stacks=False)  # an exception's way out: nothing left running
        # Every rank reaped: what is left of their groups (a worker) goes, as the supervisor's.
        world_stop.signal_groups(_groups(ranks), signal.SIGKILL)
        for r in ranks:
            os.close(r.pipe_r)
            os.close(r.pidfd)
    _write_launch_record(spec, ranks, timed_out)
    return WorldOutcome(ranks, timed_out, time.monotonic() - start)
