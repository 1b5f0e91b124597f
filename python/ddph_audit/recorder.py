"""The process-wide recorder: configuration, the trace writer, ids and the safety net.

Every instrumentor goes through ``emit``. Any exception raised by the recorder's own code goes to
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

_lock = threading.RLock()
_tls = threading.local()  # per thread: the suppression counters below; .polling


class _State:
    writer = None
    active = False
    failed = False
    rank = None
    world_size = None
    run_id = ""
    spawned_rank = False  # started by the program itself (mp.spawn): its LOCAL_RANK is the spawner's
    attempt = 0  # torchrun's restart count (TORCHELASTIC_RESTART_COUNT)
    exit_code = None
    error_seen = False
    ended = False
    counters = None
    spawner = False  # this process started ranks of its own before joining a process group


state = _State()


def is_active():
    w = state.writer
    return state.active and w is not None and not w.dead


CALLS = "calls"  # collectives and process-group calls: only the outermost is recorded
SET_EPOCH = "set_epoch"  # a sampler's set_epoch: only the outermost of nested calls is recorded


class _Suppressed:
    """``with recorder.suppressed(scope):`` what the thread calls inside is not recorded as
    ``scope`` (nests; per thread). Made once per scope: entering costs two attribute lookups."""

    __slots__ = ("_attr",)

    def __init__(self, scope):
        self._attr = "suppressed_" + scope

    def __enter__(self):
        setattr(_tls, self._attr, getattr(_tls, self._attr, 0) + 1)
        return self

    def __exit__(self, *exc):
        setattr(_tls, self._attr, getattr(_tls, self._attr) - 1)
        return False

    def active(self):
        return getattr(_tls, self._attr, 0) > 0


_suppressions = {CALLS: _Suppressed(CALLS), SET_EPOCH: _Suppressed(SET_EPOCH)}


def suppressed(scope=CALLS):
    """The context inside which this thread's calls of ``scope`` are not recorded: a wrapper
    records only when ``is_suppressed(scope)`` is False, and calls the wrapped function inside
    ``suppressed(scope)`` so that what it calls in turn (``all_gather_object`` calling
    ``all_gather``, ``init_process_group`` calling ``barrier``) is not recorded again."""
    return _suppressions[scope]


def is_suppressed(scope=CALLS):
    return _suppressions[scope].active()


def now():
    return state.writer.now() if state.writer is not None else 0.0


def fail(exc, where=""):
    """Reports an internal error once and disables recording."""
    with _lock:
        if state.failed:
            state.active = False
            return
        state.failed = True
        state.active = False
    try:
        sys.stderr.write("ddph_audit: internal error%s: %s: %s; recording disabled\n"
                         % (" in " + where if where else "", type(exc).__name__, exc))
        sys.stderr.flush()
    except Exception:
        pass


pollers = []  # called before each event (e.g. DDP futures completed meanwhile)


def _poll():
    """Runs the pollers (not re-entered); False when recording was disabled."""
    if getattr(_tls, "polling", False):
        return True
    _tls.polling = True
    try:
        for poll in pollers:
            poll()
    except Exception as e:
        fail(e, "polling")
        return False
    finally:
        _tls.polling = False
    return True


def _write(method, *args):
    """Calls the writer's ``method`` while recording (the pollers first); a failure disables."""
    w = state.writer
    if not state.active or w is None or w.dead or (pollers and not _poll()):
        return
    try:
        method(w, *args)
    except Exception as e:  # e.g. disk full
        fail(e, "writing the trace")


def emit(ev, **fields):
    _write(TraceWriter.emit, ev, fields)


def emit_many(events):
    """[(ev, fields)] as consecutive lines written at once (one time ``t``)."""
    _write(TraceWriter.emit_many, events)


def emit_line(fmt, values):
    """One event of ``trace_writer.line_format``: the events of every step."""
    _write(TraceWriter.emit_line, fmt, values)


def emit_lines(lines):
    """[(line_format, values)] as consecutive lines written at once (one time ``t``)."""
    _write(TraceWriter.emit_lines, lines)


def next_id(kind):
    with _lock:
        n = state.counters.get(kind, 0)
        state.counters[kind] = n + 1
        return n


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


def start(trace_dir, spawned_rank=False):
    """Creates the writer (idempotent). Opens the file at once when RANK is known (not for a
    spawned rank: its RANK was inherited from the spawner)."""
    with _lock:
        if state.writer is not None and state.writer.pid == os.getpid():
            state.active = not state.failed
            return
        restarts = _env_int("TORCHELASTIC_RESTART_COUNT") or 0
        state.attempt = restarts if 0 < restarts < 1000000 else 0  # as the C++ recorder reads it
        state.writer = TraceWriter(attempt_folder(trace_dir, state.attempt))
        state.counters = {}
        state.failed = False
        state.active = True
        state.ended = False
        state.error_seen = False
        state.exit_code = None
        state.run_id = os.environ.get(environment.AUDIT_RUN_ID) or os.environ.get("TORCHELASTIC_RUN_ID") or ""
        state.spawner = False
        state.spawned_rank = bool(spawned_rank)
        state.rank = None if spawned_rank else _env_int("RANK")
        state.world_size = None if spawned_rank else _env_int("WORLD_SIZE")
    if state.rank is not None and state.world_size is not None:
        open_trace(state.rank, state.world_size)


def _runtime():
    torch = sys.modules.get("torch")
    tv = getattr(torch, "__version__", None) if torch is not None else None
    py = "%d.%d.%d" % sys.version_info[:3]
    return "python %s, torch %s" % (py, tv) if tv else "python %s" % py


def _node_identity():
    """Where the rank runs, as its launcher said (torchrun, ddp-sim launch --nnodes, srun under
    torchrun): local rank, node and their sizes, and the host name it sees."""
    fields = {}
    local = () if state.spawned_rank else (("local_rank", ("LOCAL_RANK",)),
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


def become_spawner(nprocs, start_method):
    """This process starts ``nprocs`` ranks of its own and is not one: its file (open or not yet)
    is the spawner's, and the ``rank-<R>.jsonl`` names are left to the spawned ranks."""
    w = state.writer
    if w is None or state.failed:
        return
    with _lock:
        state.spawner = True
    try:
        if w.is_open:
            w.rename(spawner_file_name())
        else:
            open_trace(state.rank if state.rank is not None else 0, state.world_size or 1)
        emit(trace_events.SPAWN, nprocs=int(nprocs), start_method=str(start_method))
    except Exception as e:
        fail(e, "recording the spawn")


def open_trace(rank, world_size, exclusive=False):
    """Opens this rank's file (header first). Returns True when the file is open."""
    w = state.writer
    if w is None or state.failed:
        return False
    if w.is_open:
        return True
    try:
        header = {"trace": trace_events.TRACE, "version": trace_events.VERSION, "rank": int(rank),
                  "world_size": int(world_size) if world_size is not None else None,
                  "run_id": state.run_id, "attempt": state.attempt,
                  "start_unix": round(w.start_unix, 6), "pid": os.getpid(),
                  "producer": "ddph_audit %s" % __version__, "runtime": _runtime(),
                  "argv": [str(a) for a in sys.argv]}
        header.update(_node_identity())
        name = spawner_file_name() if state.spawner else None
        ok = w.open(int(rank), header, exclusive=exclusive, name=name)
        if ok:
            state.rank = int(rank)
            os.environ[environment.AUDIT_RANK_PID] = str(os.getpid())
        return ok
    except FileExistsError:
        state.active = False
        return False
    except Exception as e:
        fail(e, "opening the trace")
        return False


def on_process_group_ready(rank, world_size):
    """Called once torch.distributed is initialised: opens the file if RANK was unknown."""
    if state.writer is not None and not state.writer.is_open and not state.failed:
        if state.world_size is None:
            state.world_size = world_size
        open_trace(rank, world_size)
