"""What an iterable dataset's DataLoader workers drew from the global random generators.

NOTE [A stream whose workers are reseeded alike] (docs/audit.md): the recorder writes nothing in
a DataLoader worker (a forked child), so a stream that shuffles there is unseen. For a pass over
an iterable dataset with forked workers, each worker runs the loader's ``worker_init_fn`` and
then reports, in one line on a pipe its parent reads at the pass's end:

- a fingerprint of its global generators' states once ``worker_init_fn`` has run (the DataLoader
  seeds them anew for every pass; alike in two passes, the program reseeded them alike);
- the generators its first batch advanced (the stream draws its order, or its augmentation,
  from them).

The pipe is written without blocking (a full pipe drops the line) and only by forked workers:
under ``spawn`` or ``forkserver`` nothing is watched.
"""

import hashlib
import json
import multiprocessing
import os

from .rng_states import global_rng_states, moved_generators

_MAX_LINE = 512  # below PIPE_BUF: one write(2) is atomic, lines of workers never interleave


def _fingerprint(name, state):
    """A short hash of one generator's state (an entry of ``global_rng_states()``)."""
    h = hashlib.sha1()
    if name == "torch":
        h.update(state.numpy().tobytes())
    elif name == "numpy":
        h.update(state[0].tobytes())
        h.update(str(state[1]).encode())
    else:
        h.update(repr(state).encode())
    return h.hexdigest()[:16]


class _WatchedInit:
    """The loader's ``worker_init_fn``, run in each worker, then the watch of its first batch."""

    def __init__(self, user_init, fd, nonce):
        self.user_init = user_init
        self.fd = fd
        self.nonce = nonce

    def __call__(self, worker_id):
        if self.user_init is not None:
            self.user_init(worker_id)
        try:
            self._watch_first_batch(worker_id)
        except Exception:  # never the program's failure
            pass

    def _watch_first_batch(self, worker_id):
        from torch.utils.data._utils import fetch
        cls = fetch._IterableDatasetFetcher
        original = cls.__dict__["fetch"]
        started = global_rng_states()
        fd, nonce = self.fd, self.nonce

        def first_fetch(fetcher, *args, **kwargs):
            cls.fetch = original  # this worker process only
            try:
                return original(fetcher, *args, **kwargs)
            finally:
                moved = moved_generators(started, global_rng_states())
                _report(fd, {"n": nonce, "w": worker_id, "moved": moved,
                             "rng": [_fingerprint(g, started[g]) for g in moved]})

        cls.fetch = first_fetch


def _report(fd, message):
    try:
        line = (json.dumps(message) + "\n").encode()
        if len(line) <= _MAX_LINE:
            os.write(fd, line)
    except Exception:  # a full pipe, a closed one: the line is lost, the program goes on
        pass


def _forks(loader):
    ctx = getattr(loader, "multiprocessing_context", None)
    try:
        method = ctx.get_start_method() if ctx is not None else multiprocessing.get_start_method()
    except Exception:
        return False
    return method == "fork"


class WorkerWatch:
    """The parent's side: a pipe, the workers' init functions swapped in around iter(), and the
    workers' lines collected by pass."""

    def __init__(self):
        self._read = self._write = None
        self._nonce = 0
        self._lines = {}  # nonce -> [message]
        self._partial = b""

    def applies(self, loader):
        return int(getattr(loader, "num_workers", 0) or 0) > 0 and _forks(loader)

    def wrap_init(self, loader):
        """Puts a watched ``worker_init_fn`` on the loader for the iterator about to be made;
        returns (nonce, the program's own function) for ``restore``, or None."""
        if self._write is None:
            self._read, self._write = os.pipe()
            os.set_blocking(self._read, False)
            os.set_blocking(self._write, False)
        self._nonce += 1
        user_init = loader.worker_init_fn
        loader.worker_init_fn = _WatchedInit(user_init, self._write, self._nonce)
        return self._nonce, user_init

    @staticmethod
    def restore(loader, user_init):
        loader.worker_init_fn = user_init

    def collect(self, nonce):
        """What the pass's workers reported: (the generators their first batches advanced, and
        for each worker and each of them "worker generator fingerprint-at-start")."""
        self._drain()
        lines = sorted(self._lines.pop(nonce, []), key=lambda m: m.get("w", 0))
        moved, states = [], []
        for m in lines:
            for g, fp in zip(m.get("moved", ()), m.get("rng", ())):
                if g not in moved:
                    moved.append(g)
                states.append("%s %s %s" % (m.get("w"), g, fp))
        return moved, states

    def _drain(self):
        if self._read is None:
            return
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._partial += chunk
        *whole, self._partial = self._partial.split(b"\n")
        for raw in whole:
            try:
                m = json.loads(raw)
                self._lines.setdefault(int(m["n"]), []).append(m)
            except Exception:
                continue

    def close(self):
        for fd in (self._read, self._write):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._read = self._write = None
