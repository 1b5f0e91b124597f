"""Thread-safe JSON Lines writer of one rank's trace file (``rank-<R>.jsonl``).

Every event is one line, copied at once into the file through a shared memory mapping: no system
call per event, and a SIGKILLed process keeps every line it wrote (the kernel owns the mapped
pages). The file grows by reserved chunks (``posix_fallocate``, so a full disk fails the recorder,
never a store into the mapping) and is cut to its length when it is closed; a rank that never
closed its file leaves NUL bytes after its last line, where readers stop (docs/trace-format.md,
"Reading a trace"). Where the file system cannot map the file, each store is one write(2) on
O_APPEND instead. ``emit_many`` writes several lines in one call. Events emitted before the file
can be opened (the rank is not known yet) wait in memory and are written right after the header.
Only the process that created the writer writes: in a forked child (a DataLoader worker) the writer
is marked dead at the fork, so the child can neither duplicate nor corrupt the parent's lines.
"""

import errno
import fcntl
import json
import mmap
import os
import threading
import time
import weakref

from . import trace_events


def _make_dumps():
    """One compact, ASCII JSON encoding of an event; the C encoder made once where there is one
    (``JSONEncoder.encode`` makes it anew for every object)."""
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    one_shot = make(None, encoder.default, json.encoder.encode_basestring_ascii, None,
                    encoder.key_separator, encoder.item_separator, False, False, True)
    return lambda obj: "".join(one_shot(obj, 0))


_dumps = _make_dumps()

INT = object()  # a field of line_format given at each write: an int
FLAG = object()  # ... a bool, given as JSON_BOOL[flag]
JSON_BOOL = (b"false", b"true")


def line_format(ev, fields):
    """The %-format (bytes) of an event whose fields are known but for those set to INT or FLAG.

    Keys and constant values are encoded once by the one encoding above; the writer's
    ``emit_line`` fills in ``t`` first, then the INT and FLAG fields in the order of ``fields``.
    For the events of every step, which then cost one %-format instead of a dict and an encoding."""
    parts = ['{"ev":', _dumps(ev), ',"t":%.6f']
    for key, value in fields.items():
        if value is INT:
            text = "%d"
        elif value is FLAG:
            text = "%s"
        else:
            text = _dumps(value).replace("%", "%%")
        parts += [",", _dumps(key), ":", text]
    return ("".join(parts) + "}\n").encode("ascii")


# Events kept while the rank is unknown; beyond this the oldest are dropped (counted in the header).
PENDING_MAX = 100000

# The file grows by chunks of its own size, at least CHUNK_MIN and at most CHUNK_MAX bytes.
CHUNK_MIN = 1 << 20
CHUNK_MAX = 64 << 20

def _dead_in_a_forked_child(writer):
    """A forked child must not write through its parent's writer (the file is the parent's)."""
    if not hasattr(os, "register_at_fork"):
        return
    ref = weakref.ref(writer)

    def after_in_child():
        w = ref()
        if w is not None:
            w.dead = True

    os.register_at_fork(after_in_child=after_in_child)


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
        self.start_unix = time.time()  # the wall clock at t = 0: orders events across ranks
        self.pid = os.getpid()
        self.dead = False  # True in a forked child (and once closed)
        self.path = None
        self._fd = None
        self._map = None  # mmap of the file's reserved bytes; its position is the lines' end
        self._lock = threading.Lock()  # opening, growing, closing; a line is one mmap.write
        self._pending = []
        self._dropped = 0
        self._store = self._queue  # then _write once the file is open
        _dead_in_a_forked_child(self)

    def now(self):
        return time.monotonic() - self.t0

    @property
    def is_open(self):
        return self._fd is not None

    @property
    def has_queued(self):
        """Whether events wait in memory for the file to open (the rank is not known yet)."""
        return bool(self._pending)

    @staticmethod
    def _line(ev, fields, t):
        obj = {"ev": ev, "t": t}
        obj.update(fields)
        return _dumps(obj) + "\n"

    def emit(self, ev, fields):
        """Writes (or queues) one event; ``fields`` must not hold ``ev``/``t``."""
        if not self.dead:
            self._store(self._line(ev, fields, round(self.now(), 6)).encode("ascii"))

    def emit_many(self, events):
        """Writes (or queues) [(ev, fields)] as consecutive lines with one time, in one write."""
        if self.dead or not events:
            return
        t = round(self.now(), 6)
        self._store("".join([self._line(ev, fields, t) for ev, fields in events]).encode("ascii"))

    def emit_line(self, fmt, values):
        """Writes (or queues) one event of ``line_format``: ``values`` its INT and FLAG fields."""
        if not self.dead:
            self._store(fmt % ((time.monotonic() - self.t0,) + values))

    def emit_lines(self, lines):
        """[(format, values)] of ``emit_line`` as consecutive lines with one time, in one write."""
        if not self.dead:
            t = (time.monotonic() - self.t0,)
            self._store(b"".join([fmt % (t + values) for fmt, values in lines]))

    def _map_file(self, n):
        """Under the lock: maps the new file and returns _write; where the file system cannot map
        it (some FUSE mounts), returns _append, one write(2) a store."""
        try:
            self._grow(n)
            return self._write
        except OSError as e:
            if self._map is not None or e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
        os.ftruncate(self._fd, 0)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) | os.O_APPEND)
        return self._append

    def _append(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def _write(self, data):
        """Stores one or more whole lines: one mmap.write, so threads never interleave them."""
        try:
            self._map.write(data)
        except (ValueError, AttributeError):  # the reserved bytes are full (or the file closed)
            with self._lock:
                if self._map is not None:
                    self._room(len(data))
                    self._map.write(data)

    def _queue(self, data):
        with self._lock:
            if self._fd is None:
                if not self.dead:
                    if len(self._pending) >= PENDING_MAX:
                        del self._pending[0]
                        self._dropped += 1
                    self._pending.append(data)
                return
        self._store(data)  # the file opened meanwhile: stored as it now stores

    def _room(self, n):
        """Under the lock: reserves more of the file until n more bytes fit."""
        while self._map.size() - self._map.tell() < n:
            self._grow(n)

    def _grow(self, needed):
        """Under the lock: reserves the next chunk (at least ``needed`` bytes more)."""
        size = self._map.size() if self._map is not None else 0
        new = size + max(min(max(size, CHUNK_MIN), CHUNK_MAX), needed)
        new = -(-new // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
        _reserve(self._fd, size, new - size)
        if self._map is None:
            self._map = mmap.mmap(self._fd, new)
        else:
            self._map.resize(new)

    def open(self, rank, header_fields, exclusive=False, name=None):
        """Opens ``rank-<rank>.jsonl`` (or ``name``), writes the header then the queued events.

        ``exclusive``: fail (FileExistsError) instead of replacing an existing file."""
        if self.dead:
            return False
        with self._lock:
            if self._fd is not None:
                return True
            os.makedirs(self.trace_dir, exist_ok=True)
            path = os.path.join(self.trace_dir, name or "rank-%d.jsonl" % rank)
            fd = _create(path, exclusive)
            header = {"ev": trace_events.HEADER, "t": 0.0}
            header.update(header_fields)
            if self._dropped:
                header["dropped_events"] = self._dropped
            data = b"".join([(_dumps(header) + "\n").encode("ascii")] + self._pending)
            self._fd = fd
            try:
                self._store = self._map_file(len(data))
                self._store(data)
            except BaseException:
                self._release(truncate=True)
                raise
            self._pending = []
            self.path = path
            return True

    def rename(self, name):
        """Gives the open file another name in the trace folder (the mapping stays valid)."""
        with self._lock:
            if self._fd is None or self.path is None:
                return
            path = os.path.join(self.trace_dir, name)
            os.rename(self.path, path)
            self.path = path

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
        self._store = self._queue  # dead by now: stores nothing
        try:
            if m is not None:
                end = m.tell()
                m.close()
                if truncate:
                    os.ftruncate(fd, end)
        finally:
            os.close(fd)
