"""ddph_audit: records what an unmodified PyTorch DDP program does, one trace file per rank.

The trace (JSON Lines, ``rank-<R>.jsonl`` in the trace folder) is specified in
docs/trace-format.md; ``ddp-sim audit TRACE_DIR`` reads it. Three ways in:

- ``ddp-sim launch --audit ... -- python3 train.py``: puts ``ddph_audit/_sitecustomize`` and this
  package's parent on PYTHONPATH and sets ``DDPH_AUDIT_DIR``; nothing is imported or patched until
  the program imports torch.
- ``torchrun --nproc-per-node 4 -m ddph_audit --trace-dir DIR train.py [args...]``.
- ``import ddph_audit; ddph_audit.instrument("trace")`` at the top of a program.

What is patched (class or module attributes, when the torch module is imported): DistributedSampler
(``__init__``, ``set_epoch``), program sampler classes' ``set_epoch``, DataLoader (``__init__``,
``__iter__``) and its iterator (``_next_index``, ``_reset``, ``__next__``), the public collectives
of torch.distributed plus ``init_process_group``/``new_group``, DistributedDataParallel
(``__init__``, ``forward``, comm hook registration), ``torch.optim.Optimizer.__init__``,
``sys.excepthook``, ``sys.exit``, atexit.
The program's results are unchanged (bit-identical parameters); a failure of the recorder itself
is reported once on stderr (``ddph_audit: ...``) and recording stops.
"""

__version__ = "0.1.0"

import os
import sys
import threading

__all__ = ["instrument", "uninstrument", "__version__"]

_lock = threading.RLock()
_trace_dir = None
_activated = False
_spawned_rank = False
_version_noted = False
# The recorder's instrumentors, one per concern, each made and instrumented when its torch module
# is imported (in this order when they already are): concern -> instance. They patch disjoint
# attributes; uninstrument() undoes them in the reverse order.
_CONCERNS = (("distributed", "torch.distributed"), ("data", "torch.utils.data"),
             ("ddp", "torch.nn.parallel"), ("optim", "torch.optim"),
             ("spawn", "torch.multiprocessing.spawn"))
_instrumentors = {}


def _activate():
    global _activated
    with _lock:
        if _activated:
            return
        _activated = True
        from . import process_hooks, recorder
        recorder.start(_trace_dir, spawned_rank=_spawned_rank)
        process_hooks.install()


def _make(concern):
    """A new instrumentor of ``concern`` (imported only now: nothing of torch before)."""
    if concern == "distributed":
        from .distributed_instrumentor import DistributedInstrumentor
        return DistributedInstrumentor()
    if concern == "data":
        from .data_instrumentor import DataInstrumentor
        return DataInstrumentor()
    if concern == "ddp":
        from .ddp_instrumentor import DdpInstrumentor
        return DdpInstrumentor()
    if concern == "optim":
        from .grad_sync import OptimizerInstrumentor
        return OptimizerInstrumentor()
    from .spawned_ranks import SpawnedRanksInstrumentor
    return SpawnedRanksInstrumentor(_trace_dir)


def _note_version(instrumentor):
    """One line per process when torch is outside the versions the recorder was tested with."""
    global _version_noted
    note = instrumentor.version_note()
    if note and not _version_noted:
        _version_noted = True
        sys.stderr.write("ddph_audit: %s\n" % note)


def _on_import(concern):
    def callback(module):
        from . import recorder
        try:
            _activate()
            if recorder.state.failed:
                return
            instrumentor = _instrumentors.get(concern)
            if instrumentor is None:
                made = _make(concern)  # imports outside the lock
                with _lock:
                    instrumentor = _instrumentors.setdefault(concern, made)
            instrumentor.instrument()
            _note_version(instrumentor)
        except Exception as e:
            recorder.fail(e, "patching %s" % getattr(module, "__name__", "?"))

    return callback


def instrument(trace_dir, spawned_rank=False):
    """Starts recording into ``trace_dir`` (created if needed). Idempotent.

    torch modules are patched when they are imported (at once if they already are); the rank's
    file is opened then (RANK known) or when ``init_process_group`` returns. ``spawned_rank``:
    this process was started by a spawner (``spawned_ranks``): its rank is the process group's."""
    global _trace_dir, _spawned_rank
    from . import import_hook
    with _lock:
        if _trace_dir is not None:
            return
        _trace_dir = os.path.abspath(trace_dir)
        _spawned_rank = spawned_rank
        for concern, module in _CONCERNS:
            import_hook.when_imported(module, _on_import(concern))


def restart_in_forked_rank():
    """Called by ddp-sim launch's fork server (ddph_launch/fork_server.py) in each rank it forks,
    once the rank's environment is set: the rank records into a writer of its own, with the RANK
    it was given, as an exec'd rank would. Nothing when the server was not recording."""
    with _lock:
        if _trace_dir is None or not _activated:
            return
        from . import recorder
        recorder.start(_trace_dir, spawned_rank=_spawned_rank)


def uninstrument():
    """Stops recording: writes ``params``/``end``, closes the file, restores every patch.
    Idempotent."""
    global _trace_dir, _activated
    with _lock:
        if _trace_dir is None:
            return
        from . import import_hook
        import_hook.remove()
        if _activated:
            from . import process_hooks, recorder
            process_hooks.at_exit()
            process_hooks.uninstall()
            for concern, _module in reversed(_CONCERNS):
                instrumentor = _instrumentors.pop(concern, None)
                if instrumentor is not None:
                    instrumentor.uninstrument()
            recorder.state.active = False
            recorder.state.writer = None
        _instrumentors.clear()
        _trace_dir = None
        _activated = False
