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
(``__init__``, ``forward``, comm hook registration), ``sys.excepthook``, ``sys.exit``, atexit.
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
_spawned = None  # the SpawnedRanksInstrumentor, once torch.multiprocessing is imported


def _activate():
    global _activated
    with _lock:
        if _activated:
            return
        _activated = True
        from . import process_hooks, recorder
        recorder.start(_trace_dir, spawned_rank=_spawned_rank)
        process_hooks.install()


def _instrument_spawn(module):
    global _spawned
    from .spawned_ranks import SpawnedRanksInstrumentor
    if _spawned is None:
        _spawned = SpawnedRanksInstrumentor(_trace_dir)
    _spawned.instrument()


def _on_import(patch_name):
    def callback(module):
        from . import recorder
        try:
            _activate()
            if recorder.state.failed:
                return
            if patch_name == "spawn":
                _instrument_spawn(module)
                return
            if patch_name == "distributed":
                from . import distributed_instrumentor as m
            elif patch_name == "data":
                from . import data_instrumentor as m
            else:
                from . import ddp_instrumentor as m
            m.patch(module)
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
        import_hook.when_imported("torch.distributed", _on_import("distributed"))
        import_hook.when_imported("torch.utils.data", _on_import("data"))
        import_hook.when_imported("torch.nn.parallel", _on_import("ddp"))
        import_hook.when_imported("torch.multiprocessing.spawn", _on_import("spawn"))


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
    global _trace_dir, _activated, _spawned
    with _lock:
        if _trace_dir is None:
            return
        from . import import_hook
        import_hook.remove()
        if _activated:
            from . import (data_instrumentor, ddp_instrumentor, distributed_instrumentor,
                           process_hooks, recorder)
            process_hooks.at_exit()
            process_hooks.uninstall()
            data_instrumentor.unpatch()
            ddp_instrumentor.unpatch()
            distributed_instrumentor.unpatch()
            if _spawned is not None:
                _spawned.uninstrument()
                _spawned = None
            recorder.state.active = False
            recorder.state.writer = None
        _trace_dir = None
        _activated = False
