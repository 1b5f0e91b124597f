"""Thread-safe JSON Lines writer of one rank's trace file (``rank-<R>.jsonl``).

Every event is one line, written and flushed at once (no fsync: a SIGKILLed process keeps what the
kernel already has). Events emitted before the file can be opened (the rank is not known yet) wait
in memory and are written right after the header. Only the process that created the writer writes:
a forked child (a DataLoader worker) drops everything, so it can neither duplicate nor corrupt the
parent's lines.
"""

import json
import os
import threading
import time

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True).encode

# Events kept while the rank is unknown; beyond this the oldest are dropped (counted in the header).
PENDING_MAX = 100000


class TraceWriter:
    def __init__(self, trace_dir):
        self.trace_dir = trace_dir
        self.t0 = time.monotonic()
        self.pid = os.getpid()
        self.path = None
        self._file = None
        self._lock = threading.Lock()
        self._pending = []
        self._dropped = 0
        self._closed = False

    def now(self):
        return time.monotonic() - self.t0

    @property
    def is_open(self):
        return self._file is not None

    def emit(self, ev, fields):
        """Writes (or queues) one event; ``fields`` must not hold ``ev``/``t``."""
        if os.getpid() != self.pid or self._closed:
            return
        obj = {"ev": ev, "t": round(self.now(), 6)}
        obj.update(fields)
        line = _dumps(obj) + "\n"
        with self._lock:
            f = self._file
            if f is None:
                if len(self._pending) >= PENDING_MAX:
                    del self._pending[0]
                    self._dropped += 1
                self._pending.append(line)
                return
            f.write(line)
            f.flush()

    def open(self, rank, header_fields, exclusive=False):
        """Opens ``rank-<rank>.jsonl``, writes the header then the queued events.

        ``exclusive``: fail (FileExistsError) instead of replacing an existing file."""
        if os.getpid() != self.pid:
            return False
        with self._lock:
            if self._file is not None:
                return True
            os.makedirs(self.trace_dir, exist_ok=True)
            path = os.path.join(self.trace_dir, "rank-%d.jsonl" % rank)
            f = open(path, "x" if exclusive else "w", encoding="utf-8")
            header = {"ev": "header", "t": 0.0}
            header.update(header_fields)
            if self._dropped:
                header["dropped_events"] = self._dropped
            f.write(_dumps(header) + "\n")
            for line in self._pending:
                f.write(line)
            f.flush()
            self._pending = []
            self._file = f
            self.path = path
            return True

    def close(self):
        if os.getpid() != self.pid:
            return
        with self._lock:
            self._closed = True
            if self._file is not None:
                try:
                    self._file.flush()
                    self._file.close()
                finally:
                    self._file = None
