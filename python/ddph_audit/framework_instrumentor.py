"""The training framework that drives the program's loop: a ``framework`` line, written once when
its trainer is built (PyTorch Lightning's ``Trainer``), so that causes can speak its vocabulary
(``use_distributed_sampler=False``, validating on one device); and a ``logged`` line for each name
and call site of ``self.log(..., sync_dist=True)``, whose reduction across ranks Lightning runs
later, away from the program's line (a log on some ranks only is then named where it was written).
Nothing else of the framework is changed; its loaders, collectives and DDP are the ones the other
instrumentors watch."""

import functools
import importlib
import sys

from . import call_site, trace_events
from .instrumentor import Instrumentor


class LightningInstrumentor(Instrumentor):
    """``lightning.pytorch.Trainer.__init__``: one ``framework`` line per process;
    ``LightningModule.log``: one ``logged`` line per name and call site of a synced value."""

    NAME = "the Lightning instrumentor"
    MODULE = "lightning.pytorch"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def __init__(self, session):
        super().__init__(session)
        self._written = False
        self._logged = set()  # (name, call site) already written

    def _instrument(self):
        pl = sys.modules.get(self.MODULE) or importlib.import_module(self.MODULE)
        self._instrument_trainer(pl)
        self._instrument_log(pl)

    def _instrument_log(self, pl):
        module = getattr(pl, "LightningModule", None)
        fn = module.__dict__.get("log") if module is not None else None
        if fn is None or hasattr(fn, "__ddph_original__"):
            return
        rec = self.session.recorder
        instrumentor = self

        @functools.wraps(fn)
        def log(self, name, *args, **kwargs):
            if kwargs.get("sync_dist") and rec.active:
                at, _ = call_site.program_call_site()
                key = (str(name), at)
                if key not in instrumentor._logged:
                    instrumentor._logged.add(key)
                    fields = {"name": str(name)}
                    if at:
                        fields["at"] = at
                    rec.emit(trace_events.LOGGED, **fields)
            return fn(self, name, *args, **kwargs)

        log.__ddph_original__ = fn
        self.patch(module, "log", log)

    def _instrument_trainer(self, pl):
        trainer = getattr(pl, "Trainer", None)
        fn = trainer.__dict__.get("__init__") if trainer is not None else None
        if fn is None or hasattr(fn, "__ddph_original__"):
            return
        rec = self.session.recorder
        version = str(getattr(pl, "__version__", "") or "")
        instrumentor = self

        @functools.wraps(fn)
        def __init__(self, *args, **kwargs):
            fn(self, *args, **kwargs)
            if rec.active and not instrumentor._written:
                instrumentor._written = True
                rec.emit(trace_events.FRAMEWORK, name="lightning", version=version)

        __init__.__ddph_original__ = fn
        self.patch(trainer, "__init__", __init__)


class PytorchLightningInstrumentor(LightningInstrumentor):
    """The same under the older package name (``pytorch_lightning.Trainer``)."""

    NAME = "the pytorch_lightning instrumentor"
    MODULE = "pytorch_lightning"
