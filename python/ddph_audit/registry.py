"""The one registry of instrumentors: which class instruments which module, and what turns it on.

``INSTRUMENTORS`` lists every instrumentor the harness installs, in the order it installs them:
the module whose import installs it (None: when recording starts, before the first other one of
the recorder), the class (``"package.module:Class"``, imported only then) and its switch, the
environment variable that turns it on (environment.py). The recorder's own are switched by
``DDPH_AUDIT_DIR``; the emulation's (ddph_emulation) by ``DDPH_NODES``, ``DDPH_CPU`` and
``DDPH_STAND_IN_DATA``. They come in three ways, all through this process's ``Instrumentation``
(``ddph_audit``'s one):

- ``ddph_audit.instrument(dir)``: the recorder's entries, recording into ``dir``;
- the sitecustomize (``ddp-sim launch``): every entry whose switch its environment sets
  (``install_switched``), the recorder's only in a process that records (``recording_request``);
- ``python3 -m ddph_audit``: its options set the switches, then the same.

An entry's class is made once per process, as ``Cls(session)`` (instrumentor.py), when its module
is imported (at once if it already is: import_hook.py); the recorder's are undone by
``ddph_audit.uninstrument()``, the emulation's stay for the process's life. Standard library only,
and nothing of torch imported here: the sitecustomize of every audited process imports it.
"""

import collections
import importlib
import os
import sys
import threading

from . import environment, import_hook


class Entry(collections.namedtuple("Entry", "name module cls switch")):
    """One instrumentor: ``name`` (the registry's key), ``module`` (None: when recording starts),
    ``cls`` ("package.module:Class"), ``switch`` (an environment.py name)."""

    @property
    def records(self):
        return self.switch == environment.AUDIT_DIR

    def load(self):
        module, _, name = self.cls.partition(":")
        return getattr(importlib.import_module(module), name)


INSTRUMENTORS = (
    # The emulated node's host name at once (os is always imported), before anything asks for it.
    Entry("node host", "os", "ddph_emulation.emulated_node:NodeHostInstrumentor",
          environment.NODES),
    Entry("node gloo", "torch.distributed.distributed_c10d",
          "ddph_emulation.emulated_node:NodeGlooInstrumentor", environment.NODES),
    Entry("process", None, "ddph_audit.process_hooks:ProcessInstrumentor", environment.AUDIT_DIR),
    Entry("distributed", "torch.distributed",
          "ddph_audit.distributed_instrumentor:DistributedInstrumentor", environment.AUDIT_DIR),
    Entry("data", "torch.utils.data", "ddph_audit.data_instrumentor:DataInstrumentor",
          environment.AUDIT_DIR),
    Entry("ddp", "torch.nn.parallel", "ddph_audit.ddp_instrumentor:DdpInstrumentor",
          environment.AUDIT_DIR),
    Entry("optim", "torch.optim", "ddph_audit.grad_sync:OptimizerInstrumentor",
          environment.AUDIT_DIR),
    Entry("seeds", "torch", "ddph_audit.seeds:SeedInstrumentor", environment.AUDIT_DIR),
    Entry("averaged model", "torch.optim.swa_utils",
          "ddph_audit.averaged_model:AveragedModelInstrumentor", environment.AUDIT_DIR),
    Entry("spawn", "torch.multiprocessing.spawn",
          "ddph_audit.spawned_ranks:SpawnedRanksInstrumentor", environment.AUDIT_DIR),
    Entry("lightning", "lightning.pytorch",
          "ddph_audit.framework_instrumentor:LightningInstrumentor", environment.AUDIT_DIR),
    Entry("pytorch_lightning", "pytorch_lightning",
          "ddph_audit.framework_instrumentor:PytorchLightningInstrumentor", environment.AUDIT_DIR),
    # After the recorder's (torch's own import runs theirs first), so that it wraps them.
    Entry("cpu", "torch", "ddph_emulation.cuda_on_cpu:CudaOnCpuInstrumentor", environment.CPU),
    Entry("stand-in data", "torchvision.datasets",
          "ddph_emulation.stand_in_data:StandInDataInstrumentor", environment.STAND_IN_DATA),
)


def started_by_spawner(environ=None):
    """True in a child that an audited spawner started (a rank of its own: spawned_ranks.py)."""
    environ = os.environ if environ is None else environ
    return environ.get(environment.AUDIT_SPAWNER, "") == str(os.getppid())


def recording_request(environ=None):
    """(trace folder, spawned rank) when this process records, else None: ``DDPH_AUDIT_DIR`` is
    set and the process was not started by an audited rank (``DDPH_AUDIT_RANK_PID`` set to
    another pid: a spawned DataLoader worker, a subprocess of the program), unless an audited
    spawner started it (``torch.multiprocessing.spawn``: a rank of its own)."""
    environ = os.environ if environ is None else environ
    trace_dir = environ.get(environment.AUDIT_DIR)
    if not trace_dir:
        return None
    spawned = started_by_spawner(environ)
    owner = environ.get(environment.AUDIT_RANK_PID)
    if owner and owner != str(os.getpid()) and not spawned:
        return None
    return trace_dir, spawned


def _note(line):
    try:
        sys.stderr.write("ddph_audit: %s\n" % line)
    except Exception:
        pass


class Instrumentation:
    """One process's instrumentors, made from ``entries`` as their modules are imported, and its
    recording session (session.py) once recording started. Any thread may import a module: the
    instances and the session are made under ``_lock`` (reentrant: an import it triggers may
    fire another entry), each once."""

    def __init__(self, entries=INSTRUMENTORS):
        self.entries = entries
        self.session = None  # session.Session, once a module of the recorder was imported
        self._lock = threading.RLock()
        self._imports = import_hook.ImportHooks()
        self._hooks = {}  # entry name -> its import callback, from install to uninstall
        self._made = {}  # entry name -> its instrumentor
        self._recording = None  # (trace folder, spawned rank) from instrument() on
        self._started = False  # recording started (the session made, or its making failed)
        self._version_noted = False

    # -- what is installed ----------------------------------------------------------------

    def install_switched(self, switches=None, environ=None):
        """Installs the entries whose switch ``environ`` (the process's) turns on, among
        ``switches`` (every switch by default), in the registry's order."""
        environ = os.environ if environ is None else environ
        request = recording_request(environ)
        for entry in self.entries:
            if switches is not None and entry.switch not in switches:
                continue
            if entry.records:
                if request is not None:
                    self.record(*request)  # every entry of the recorder, once
            elif environment.is_on(entry.switch, environ):
                self.install([entry])

    def record(self, trace_dir, spawned_rank=False):
        """Records into ``trace_dir`` from now on: the recorder's entries installed. Idempotent."""
        with self._lock:
            if self._recording is not None:
                return
            self._recording = (os.path.abspath(trace_dir), spawned_rank)
        self.install([e for e in self.entries if e.records and e.module is not None])

    def install(self, entries):
        """Each entry's class made and instrumented when its module is imported (now if it is)."""
        for entry in entries:
            with self._lock:
                if entry.name in self._hooks:
                    continue
                hook = self._hooks[entry.name] = self._on_import(entry)
            self._imports.when_imported(entry.module, hook)

    def _on_import(self, entry):
        def callback(module):
            where = getattr(module, "__name__", "?")
            if entry.records:
                self._instrument_recorded(entry, where)
            else:
                self._instrument_other(entry)

        return callback

    # -- the recorder's entries: failures disable recording ---------------------------------

    def _instrument_recorded(self, entry, where):
        session = None
        try:
            session = self._start_recording()
            if session is None or session.recorder.failed:
                return
            instrumentor = self._make(entry, session)
            instrumentor.instrument()
            self._note_version_once(instrumentor)
        except Exception as e:
            if session is not None:
                session.recorder.fail(e, "patching %s" % where)
            else:
                from .recorder import report_failure
                report_failure(e, "patching %s" % where)

    def _start_recording(self):
        """The session, made (and its recorder started, its module-less entries instrumented)
        by the first recorded module imported after ``record``."""
        with self._lock:
            if self._started or self._recording is None:
                return self.session
            self._started = True
            from .session import Session
            session = self.session = Session(*self._recording)
            session.start()
            for entry in self.entries:
                if entry.records and entry.module is None:
                    self._make(entry, session).instrument()
            return session

    def _note_version_once(self, instrumentor):
        """One line per process when torch is outside the versions the recorder was tested with."""
        note = instrumentor.version_note()
        if note and not self._version_noted:
            self._version_noted = True
            _note(note)

    # -- the others: a failure is one line, and the program meets the module as it is ----------

    def _instrument_other(self, entry):
        try:
            instrumentor = self._make(entry, self.session)
        except Exception as e:
            _note("%s could not be installed: %s: %s" % (entry.cls, type(e).__name__, e))
            return
        try:
            instrumentor.instrument()
            note = instrumentor.version_note()
            if note:
                _note(note)
        except Exception as e:
            _note("%s could not be installed: %s: %s" % (instrumentor.NAME, type(e).__name__, e))

    def _make(self, entry, session):
        with self._lock:
            instrumentor = self._made.get(entry.name)
        if instrumentor is None:
            made = entry.load()(session)  # its module imported outside the lock
            with self._lock:
                instrumentor = self._made.setdefault(entry.name, made)
        return instrumentor

    # -- the forked rank, the end -------------------------------------------------------------

    def restart_in_forked_rank(self):
        """In a rank a fork server forked: its own file, as an exec'd rank would have."""
        with self._lock:
            if self.session is not None:
                self.session.start()

    def stop_recording(self):
        """Writes ``params``/``end``, closes the file, undoes the recorder's entries. Idempotent."""
        with self._lock:
            if self._recording is None:
                return
            recorded = [e for e in self.entries if e.records]
            for entry in recorded:
                hook = self._hooks.pop(entry.name, None)
                if hook is not None and entry.module is not None:
                    self._imports.cancel(entry.module, hook)
            session = self.session
            if session is not None:
                from . import process_hooks
                process_hooks.at_exit(session)
                for entry in reversed(recorded):
                    instrumentor = self._made.pop(entry.name, None)
                    if instrumentor is not None:
                        instrumentor.uninstrument()
                session.recorder.stop()
            self.session = None
            self._recording = None
            self._started = False
