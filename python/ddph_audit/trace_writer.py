"""Thread-safe JSON Lines writer of one rank's trace file (``rank-<R>.jsonl``).

Every event is one line, copied at once into the file through a shared memory mapping: no system
call per event, and a SIGKILLed process keeps every line it wrote (the kernel owns the mapped
pages). The file grows by reserved chunks (``posix_fallocate``, so a full disk fails the recorder,
never a store into the mapping) and is cut to its length when it is closed; a rank that never
closed its file leaves NUL bytes after its last line, where readers stop (docs/trace-format.md,
"Reading a trace"). ``emit_many`` writes several lines in one call. Events emitted before the file
can be opened (the rank is not known yet) wait in memory and are written right after the header.
Only the process that created the writer writes: in a forked child (a DataLoader worker) the writer
is marked dead at the fork, so the child can neither duplicate nor corrupt the parent's lines.
"""

import json
import mmap
import os
import threading
import time
import weakref

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True).encode

# Events kept while the rank is unknown; beyond this the oldest are dropped (counted in the header).
PENDING_MAX = 100000

# The file grows by chunks of its own size, at least CHUNK_MIN and at most CHUNK_MAX bytes.
CHUNK_MIN = 1 << 20
CHUNK_MAX = 64 << 20

_writers = weakref.WeakSet()  # every writer of this process, marked dead in a forked child


def _after_fork_in_child():
    for w in list(_writers):
        w.dead = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _create(path, exclusive):
    """A new file at ``path``; an existing one is unlinked first (unless ``exclusive``), so that a
    process still mapping it keeps its own file instead of storing past a truncated end."""
    if not exclusive:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)


def _reserve(fd, start, length):
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, start, length)
    else:
        os.ftruncate(fd, start + length)


class TraceWriter:
    def __init__(self, trace_dir):
        self.trace_dir = trace_dir
        self.t0 = time.monotonic()
        self.pid = os.getpid()
        self.dead = False  # True in a forked child (and once closed)
        self.path = None
        self._fd = None
        self._map = None  # mmap of the file's first _size bytes; lines end at _end
        self._size = 0
        self._end = 0
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
            self._append(text.encode("ascii"))

    def _append(self, data):
        end = self._end + len(data)
        if end > self._size:
            self._grow(end)
        self._map[self._end:end] = data
        self._end = end

    def _grow(self, needed):
        size = self._size + min(max(self._size, CHUNK_MIN), CHUNK_MAX)
        size = max(size, needed)
        size = -(-size // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
        _reserve(self._fd, self._size, size - self._size)
        if self._map is None:
            self._map = mmap.mmap(self._fd, size)
        else:
            self._map.resize(size)
        self._size = size

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
            fd = _create(path, exclusive)
            header = {"ev": "header", "t": 0.0}
            header.update(header_fields)
            if self._dropped:
                header["dropped_events"] = self._dropped
            self._fd = fd
            try:
                self._append(("".join([_dumps(header) + "\n"] + self._pending)).encode("ascii"))
            except BaseException:
                self._release(truncate=True)
                raise
            self._pending = []
            self.path = path
            return True

    def close(self):
        """Cuts the file to its lines and closes it (in a forked child: forgets it, untouched)."""
        with self._lock:
            was_dead = self.dead
            self.dead = True
            if self._fd is not None:
                self._release(truncate=not was_dead)

    def _release(self, truncate):
        fd, m = self._fd, self._map
        self._fd = self._map = None
        try:
            if m is not None:
                m.close()
            if truncate:
                os.ftruncate(fd, self._end)
        finally:
            os.close(fd)
