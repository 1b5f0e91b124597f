"""The training framework that drives the program's loop: a ``framework`` line, written once when
its trainer is built (PyTorch Lightning's ``Trainer``), so that causes can speak its vocabulary
(``use_distributed_sampler=False``, validating on one device). Nothing else of the framework is
changed; its loaders, collectives and DDP are the ones the other instrumentors watch."""

import functools
import importlib
import sys

from . import trace_events
from .instrumentor import Instrumentor


class LightningInstrumentor(Instrumentor):
    """``lightning.pytorch.Trainer.__init__``: one ``framework`` line per process."""

    NAME = "the Lightning instrumentor"
    MODULE = "lightning.pytorch"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def __init__(self, session):
        super().__init__(session)
        self._written = False

    def _instrument(self):
        pl = sys.modules.get(self.MODULE) or importlib.import_module(self.MODULE)
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
