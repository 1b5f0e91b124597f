"""Thread-safe JSON Lines writer of one rank's trace file (``rank-<R>.jsonl``).

Every event is one line, handed to the kernel at once by one write(2) on a descriptor opened with
O_APPEND (no buffering in Python, no fsync: a SIGKILLed process keeps what the kernel already
has). ``emit_many`` writes several lines in one call. Events emitted before the file can be opened
(the rank is not known yet) wait in memory and are written right after the header. Only the
process that created the writer writes: in a forked child (a DataLoader worker) the writer is
marked dead at the fork, so the child can neither duplicate nor corrupt the parent's lines.
"""

import json
import os
import threading
import time
import weakref

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True).encode

# Events kept while the rank is unknown; beyond this the oldest are dropped (counted in the header).
PENDING_MAX = 100000

_writers = weakref.WeakSet()  # every writer of this process, marked dead in a forked child


def _after_fork_in_child():
    for w in list(_writers):
        w.dead = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class TraceWriter:
    def __init__(self, trace_dir):
        self.trace_dir = trace_dir
        self.t0 = time.monotonic()
        self.pid = os.getpid()
        self.dead = False  # True in a forked child (and once closed)
        self.path = None
        self._fd = None
        self._lock = threading.Lock()
        self._pending = []
        self._dropped = 0
        _writers.add(self)

    def now(self):
        return time.monotonic() - self.t0

    @property
    def is_open(self):
        return self._fd is not None

    def _line(self, ev, fields, t):
        obj = {"ev": ev, "t": t}
        obj.update(fields)
        return _dumps(obj) + "\n"

    def emit(self, ev, fields):
        """Writes (or queues) one event; ``fields`` must not hold ``ev``/``t``."""
        if self.dead:
            return
        self._put(self._line(ev, fields, round(self.now(), 6)))

    def emit_many(self, events):
        """Writes (or queues) [(ev, fields)] as consecutive lines with one time, in one write."""
        if self.dead or not events:
            return
        t = round(self.now(), 6)
        self._put("".join(self._line(ev, fields, t) for ev, fields in events))

    def _put(self, text):
        with self._lock:
            fd = self._fd
            if fd is None:
                if self.dead:
                    return
                if len(self._pending) >= PENDING_MAX:
                    del self._pending[0]
                    self._dropped += 1
                self._pending.append(text)
                return
            _write_all(fd, text.encode("ascii"))

    def open(self, rank, header_fields, exclusive=False):
        """Opens ``rank-<rank>.jsonl``, writes the header then the queued events.

        ``exclusive``: fail (FileExistsError) instead of replacing an existing file."""
        if self.dead:
            return False
        with self._lock:
            if self._fd is not None:
                return True
            os.makedirs(self.trace_dir, exist_ok=True)
            path = os.path.join(self.trace_dir, "rank-%d.jsonl" % rank)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            flags |= os.O_EXCL if exclusive else os.O_TRUNC
            fd = os.open(path, flags, 0o666)
            header = {"ev": "header", "t": 0.0}
            header.update(header_fields)
            if self._dropped:
                header["dropped_events"] = self._dropped
            try:
                _write_all(fd, ("".join([_dumps(header) + "\n"] + self._pending)).encode("ascii"))
            except BaseException:
                os.close(fd)
                raise
            self._pending = []
            self._fd = fd
            self.path = path
            return True

    def close(self):
        with self._lock:
            was_dead = self.dead
            self.dead = True
            fd, self._fd = self._fd, None
            if fd is not None and not was_dead:
                os.close(fd)
