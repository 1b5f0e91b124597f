"""The recorder: the trace writer, ids, what is known of the rank and its exit, the safety net.

A ``Recorder`` is one process's (its recording session's, session.py); every instrumentor of the
session writes through its ``emit``. Any exception raised by the recorder's own code goes to
``fail``: reported once on stderr (``ddph_audit: ...``), recording disabled for the rest of the
process, and the user's call proceeds as if nothing were instrumented.

Which rank writes: the ``RANK`` and ``WORLD_SIZE`` environment variables (torchrun, ``ddp-sim
launch``: the file opens when torch is imported); else the rank and world size of
``init_process_group`` (the file opens when it returns; earlier events wait in memory); else, at
exit, ``RANK`` or 0 with world size 1 (only if the process recorded something and no such file
exists yet). A process started by an audited rank (a spawned DataLoader worker,
a subprocess) sees ``DDPH_AUDIT_RANK_PID`` (set by the rank once its file is open) and records
nothing; a forked child is recognised by its pid.

Programs that start their own ranks (``torch.multiprocessing.spawn``, docs/audit.md): the process
that spawns before joining a process group is a *spawner*: its file becomes
``spawner-<pid>.jsonl`` (with a ``spawn`` event), and each spawned process is a *spawned rank*,
which ignores the ``RANK``/``WORLD_SIZE`` it inherited and opens ``rank-<R>.jsonl`` when
``init_process_group`` returns, R its rank in the process group.
"""

import os
import sys
import threading

from . import __version__, environment, trace_events
from .trace_writer import TraceWriter

CALLS = "calls"  # collectives and process-group calls: only the outermost is recorded
SET_EPOCH = "set_epoch"  # a sampler's set_epoch: only the outermost of nested calls is recorded


class _Suppressed:
    """``with recorder.suppressed(scope):`` what the thread calls inside is not recorded as
    ``scope`` (nests; per thread). Made once per scope: entering costs two attribute lookups."""

    __slots__ = ("_tls", "_attr")

    def __init__(self, tls, scope):
        self._tls = tls
        self._attr = "suppressed_" + scope

    def __enter__(self):
        setattr(self._tls, self._attr, getattr(self._tls, self._attr, 0) + 1)
        return self

    def __exit__(self, *exc):
        setattr(self._tls, self._attr, getattr(self._tls, self._attr) - 1)
        return False

    def active(self):
        return getattr(self._tls, self._attr, 0) > 0


def report_failure(exc, where=""):
    """The one line of an internal error (``fail``, or a session that could not even start)."""
    try:
        sys.stderr.write("ddph_audit: internal error%s: %s: %s; recording disabled\n"
                         % (" in " + where if where else "", type(exc).__name__, exc))
        sys.stderr.flush()
    except Exception:
        pass


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        return int(v)
    except ValueError:
        return None


def attempt_folder(trace_dir, attempt):
    """Where one attempt's rank files go: the trace folder for the first, ``attempt-<K>`` in it
    for torchrun's K-th restart of the ranks (docs/trace-format.md), so a restart never replaces
    the trace of the failure that caused it."""
    return trace_dir if attempt == 0 else os.path.join(trace_dir, "attempt-%d" % attempt)


def _runtime():
    torch = sys.modules.get("torch")
    tv = getattr(torch, "__version__", None) if torch is not None else None
    py = "%d.%d.%d" % sys.version_info[:3]
    return "python %s, torch %s" % (py, tv) if tv else "python %s" % py


def _node_identity(spawned_rank):
    """Where the rank runs, as its launcher said (torchrun, ddp-sim launch --nnodes, srun under
    torchrun): local rank, node and their sizes, and the host name it sees."""
    fields = {}
    local = () if spawned_rank else (("local_rank", ("LOCAL_RANK",)),
                                     ("local_world_size", ("LOCAL_WORLD_SIZE",)))
    for key, names in local + (("node", ("GROUP_RANK", "NODE_RANK")),):
        for name in names:
            value = _env_int(name)
            if value is not None and 0 <= value < 1 << 31:
                fields[key] = value
                break
    try:
        import socket
        fields["hostname"] = str(socket.gethostname())
    except Exception:
        pass
    return fields


def spawner_file_name():
    return "spawner-%d.jsonl" % os.getpid()


class Recorder:
    """One process's recording state and its writes. ``active`` is read on every recorded call (a
    plain attribute); ``pollers`` run before each event (DDP futures completed meanwhile).

    Threads: ``emit`` is called from any thread (the autograd thread writes DDP's buckets); ids,
    opening and failing take ``_lock``; the writer keeps its own lock for its file."""

    CALLS = CALLS  # the suppression scopes, for the instrumentors that hold an instance
    SET_EPOCH = SET_EPOCH

    def __init__(self):
        self.writer = None
        self.active = False
        self.failed = False
        self.rank = None
        self.world_size = None
        self.run_id = ""
        # Started by the program itself (mp.spawn): its LOCAL_RANK is the spawner's.
        self.spawned_rank = False
        self.attempt = 0  # torchrun's restart count (TORCHELASTIC_RESTART_COUNT)
        self.exit_code = None
        self.error_seen = False
        self.ended = False
        self.counters = {}
        self.spawner = False  # this process started ranks of its own before joining a process group
        self.pollers = []
        self._lock = threading.RLock()
        self._tls = threading.local()  # per thread: the suppression counters; .polling
        self._suppressions = {scope: _Suppressed(self._tls, scope) for scope in (CALLS, SET_EPOCH)}

    def is_active(self):
        w = self.writer
        return self.active and w is not None and not w.dead

    def suppressed(self, scope=CALLS):
        """The context inside which this thread's calls of ``scope`` are not recorded: a wrapper
        records only when ``is_suppressed(scope)`` is False, and calls the wrapped function inside
        ``suppressed(scope)`` so that what it calls in turn (``all_gather_object`` calling
        ``all_gather``, ``init_process_group`` calling ``barrier``) is not recorded again."""
        return self._suppressions[scope]

    def is_suppressed(self, scope=CALLS):
        return self._suppressions[scope].active()

    def now(self):
        return self.writer.now() if self.writer is not None else 0.0

    def fail(self, exc, where=""):
        """Reports an internal error once and disables recording."""
        with self._lock:
            if self.failed:
                self.active = False
                return
            self.failed = True
            self.active = False
        report_failure(exc, where)

    def _poll(self):
        """Runs the pollers (not re-entered); False when recording was disabled."""
        tls = self._tls
        if getattr(tls, "polling", False):
            return True
        tls.polling = True
        try:
            for poll in self.pollers:
                poll()
        except Exception as e:
            self.fail(e, "polling")
            return False
        finally:
            tls.polling = False
        return True

    def _write(self, method, *args):
        """Calls the writer's ``method`` while recording (the pollers first); a failure disables."""
        w = self.writer
        if not self.active or w is None or w.dead or (self.pollers and not self._poll()):
            return
        try:
            method(w, *args)
        except Exception as e:  # e.g. disk full
            self.fail(e, "writing the trace")

    def emit(self, ev, **fields):
        self._write(TraceWriter.emit, ev, fields)

    def emit_many(self, events):
        """[(ev, fields)] as consecutive lines written at once (one time ``t``)."""
        self._write(TraceWriter.emit_many, events)

    def emit_line(self, fmt, values):
        """One event of ``trace_writer.line_format``: the events of every step."""
        self._write(TraceWriter.emit_line, fmt, values)

    def emit_lines(self, lines):
        """[(line_format, values)] as consecutive lines written at once (one time ``t``)."""
        self._write(TraceWriter.emit_lines, lines)

    def next_id(self, kind):
        with self._lock:
            n = self.counters.get(kind, 0)
            self.counters[kind] = n + 1
            return n

    def start(self, trace_dir, spawned_rank=False):
        """Creates the writer (idempotent; a forked child gets its own). Opens the file at once
        when RANK is known (not for a spawned rank: its RANK was inherited from the spawner)."""
        with self._lock:
            if self.writer is not None and self.writer.pid == os.getpid():
                self.active = not self.failed
                return
            restarts = _env_int("TORCHELASTIC_RESTART_COUNT") or 0
            self.attempt = restarts if 0 < restarts < 1000000 else 0  # as the C++ recorder reads it
            self.writer = TraceWriter(attempt_folder(trace_dir, self.attempt))
            self.counters = {}
            self.failed = False
            self.active = True
            self.ended = False
            self.error_seen = False
            self.exit_code = None
            self.run_id = (os.environ.get(environment.AUDIT_RUN_ID)
                           or os.environ.get("TORCHELASTIC_RUN_ID") or "")
            self.spawner = False
            self.spawned_rank = bool(spawned_rank)
            self.rank = None if spawned_rank else _env_int("RANK")
            self.world_size = None if spawned_rank else _env_int("WORLD_SIZE")
        if self.rank is not None and self.world_size is not None:
            self.open_trace(self.rank, self.world_size)

    def stop(self):
        """Recording is over (``uninstrument``): nothing more is written; the file was closed."""
        self.active = False
        self.writer = None

    def become_spawner(self, nprocs, start_method):
        """This process starts ``nprocs`` ranks of its own and is not one: its file (open or not
        yet) is the spawner's, and the ``rank-<R>.jsonl`` names are left to the spawned ranks."""
        w = self.writer
        if w is None or self.failed:
            return
        with self._lock:
            self.spawner = True
        try:
            if w.is_open:
                w.rename(spawner_file_name())
            else:
                self.open_trace(self.rank if self.rank is not None else 0, self.world_size or 1)
            self.emit(trace_events.SPAWN, nprocs=int(nprocs), start_method=str(start_method))
        except Exception as e:
            self.fail(e, "recording the spawn")

    def open_trace(self, rank, world_size, exclusive=False):
        """Opens this rank's file (header first). Returns True when the file is open."""
        w = self.writer
        if w is None or self.failed:
            return False
        if w.is_open:
            return True
        try:
            header = {"trace": trace_events.TRACE, "version": trace_events.VERSION,
                      "rank": int(rank),
                      "world_size": int(world_size) if world_size is not None else None,
                      "run_id": self.run_id, "attempt": self.attempt,
                      "start_unix": round(w.start_unix, 6), "pid": os.getpid(),
                      "producer": "ddph_audit %s" % __version__, "runtime": _runtime(),
                      "argv": [str(a) for a in sys.argv]}
            header.update(_node_identity(self.spawned_rank))
            name = spawner_file_name() if self.spawner else None
            ok = w.open(int(rank), header, exclusive=exclusive, name=name)
            if ok:
                self.rank = int(rank)
                os.environ[environment.AUDIT_RANK_PID] = str(os.getpid())
            return ok
        except FileExistsError:
            self.active = False
            return False
        except Exception as e:
            self.fail(e, "opening the trace")
            return False

    def on_process_group_ready(self, rank, world_size):
        """Called once torch.distributed is initialised: opens the file if RANK was unknown."""
        if self.writer is not None and not self.writer.is_open and not self.failed:
            if self.world_size is None:
                self.world_size = world_size
            self.open_trace(rank, world_size)
