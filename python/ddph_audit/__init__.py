"""ddph_audit: records what an unmodified PyTorch DDP program does, one trace file per rank.

The trace (JSON Lines, ``rank-<R>.jsonl`` in the trace folder) is specified in
docs/trace-format.md; ``ddp-sim audit TRACE_DIR`` reads it. Three ways in, one registry of
instrumentors behind them (registry.py):

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

from . import registry

__all__ = ["instrument", "uninstrument", "__version__"]

# This process's instrumentors and recording: the package's one object of state (registry.py).
_THIS_PROCESS = registry.Instrumentation()


def instrument(trace_dir, spawned_rank=False):
    """Starts recording into ``trace_dir`` (created if needed). Idempotent.

    torch modules are patched when they are imported (at once if they already are); the rank's
    file is opened then (RANK known) or when ``init_process_group`` returns. ``spawned_rank``:
    this process was started by a spawner (``spawned_ranks``): its rank is the process group's."""
    _THIS_PROCESS.record(trace_dir, spawned_rank)


def install_from_environment(switches=None):
    """Installs what the environment switches on (``DDPH_AUDIT_DIR``, ``DDPH_CPU``, ...: among
    ``switches``, environment.py names, or all): the sitecustomize's and ``-m ddph_audit``'s way
    in."""
    _THIS_PROCESS.install_switched(switches)


def session():
    """This process's recording session (session.py) once recording started, else None."""
    return _THIS_PROCESS.session


def restart_in_forked_rank():
    """Called by ddp-sim launch's fork server (ddph_launch/fork_server.py) in each rank it forks,
    once the rank's environment is set: the rank records into a writer of its own, with the RANK
    it was given, as an exec'd rank would. Nothing when the server was not recording."""
    _THIS_PROCESS.restart_in_forked_rank()


def record_error(exc_type, exc, tb=None):
    """Records an error the program's own code raised and something else caught (a test
    runner's rank): the ``error`` line an uncaught one gets. Nothing when not recording."""
    current = _THIS_PROCESS.session
    if current is not None:
        from . import process_hooks
        process_hooks.record_error(current.recorder, exc_type, exc, tb)


def note_exit_code(code):
    """The code the program leaves with, for ``end`` (``SystemExit`` seen by a runner)."""
    current = _THIS_PROCESS.session
    if current is not None:
        from . import process_hooks
        process_hooks.note_exit_code(current.recorder, code)


def finish():
    """Writes ``params``/``end`` and closes the file now, as the exit would (a rank that leaves by
    ``os._exit``). Nothing when not recording."""
    current = _THIS_PROCESS.session
    if current is not None:
        from . import process_hooks
        process_hooks.at_exit(current)


def uninstrument():
    """Stops recording: writes ``params``/``end``, closes the file, restores every patch of the
    recorder. Idempotent."""
    _THIS_PROCESS.stop_recording()
