"""Ranks a program starts itself: ``torch.multiprocessing.spawn`` / ``start_processes``.

The second seed article, PyTorch's ``multigpu.py`` tutorial and its ImageNet example start one
process, which spawns a rank per GPU. Every one of those ranks is recorded:

- in the spawning process, ``start_processes`` (which ``spawn`` calls) marks the process a
  *spawner* when it has not joined a process group (``recorder.become_spawner``: its file becomes
  ``spawner-<pid>.jsonl``) and puts its pid in ``DDPH_AUDIT_SPAWNER`` for the children it starts;
- a child whose parent is that pid is a *spawned rank* (``registry.recording_request``): it
  records from its start
  and names its file by its rank in the process group, not by the ``RANK`` it inherited;
- torch's per-rank entry (``torch.multiprocessing.spawn._wrap``) catches the rank's exception to
  send it to the parent, so the wrapped entry records it first, and writes the rank's ``end``
  itself (a forked child leaves through ``os._exit``, which skips atexit).
"""

import functools
import os
import sys

from . import environment, process_hooks
from .instrumentor import Instrumentor


class _RecordingEntry:
    """The rank's function, recording the exception it raises before torch's entry catches it."""

    def __init__(self, fn, recorder):
        self.fn = fn
        self.recorder = recorder

    def __call__(self, *args, **kwargs):
        try:
            return self.fn(*args, **kwargs)
        except BaseException as e:
            process_hooks.record_error(self.recorder, type(e), e, e.__traceback__)
            raise


class SpawnedRanksInstrumentor(Instrumentor):
    NAME = "the spawned-ranks instrumentor"

    def _instrument(self):
        module = sys.modules.get("torch.multiprocessing.spawn")
        if module is None:
            import importlib
            module = importlib.import_module("torch.multiprocessing.spawn")
        start = getattr(module, "start_processes", None)
        if start is not None:
            wrapper = self._starting(start)
            self.patch(module, "start_processes", wrapper)
            package = sys.modules.get("torch.multiprocessing")
            if package is not None and getattr(package, "start_processes", None) is start:
                self.patch(package, "start_processes", wrapper)
        entry = getattr(module, "_wrap", None)
        if entry is not None:
            self.patch(module, "_wrap", self._rank_entry(entry))

    def _starting(self, start):
        recorder = self.session.recorder

        @functools.wraps(start)
        def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
            dist = sys.modules.get("torch.distributed")
            joined = dist is not None and dist.is_available() and dist.is_initialized()
            if joined or not recorder.is_active():
                return start(fn, args, nprocs, join, daemon, start_method)
            recorder.become_spawner(nprocs, start_method)
            before = os.environ.get(environment.AUDIT_SPAWNER)
            os.environ[environment.AUDIT_SPAWNER] = str(os.getpid())
            try:
                return start(fn, args, nprocs, join, daemon, start_method)
            finally:
                if before is None:
                    os.environ.pop(environment.AUDIT_SPAWNER, None)
                else:
                    os.environ[environment.AUDIT_SPAWNER] = before

        return start_processes

    def _rank_entry(self, entry):
        session = self.session

        @functools.wraps(entry)
        def _wrap(fn, *args, **kwargs):
            w = session.recorder.writer
            if w is None or w.pid != os.getpid():  # a forked child: its own file (the process
                session.start(spawned_rank=True)  # hooks came with the fork)
            try:
                return entry(_RecordingEntry(fn, session.recorder), *args, **kwargs)
            finally:
                process_hooks.at_exit(session)

        return _wrap
