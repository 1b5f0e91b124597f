"""Averaged models (``torch.optim.swa_utils.AveragedModel``: SWA, EMA): an ``averaged`` line for
each ``update_parameters`` (how many snapshots it holds then, and the program's line), and an
``averaged_use`` line at its first forward after each update (and at its first forward at all),
with a hash of its parameters then. The audit compares what the ranks ran: an averaged model
updated on rank 0 only and then run on every rank (a sharded evaluation of the SWA weights) runs
other weights on the other ranks (docs/audit.md, "Averaged models"). One per recording session."""

import functools
import importlib
import itertools
import sys

from . import call_site, trace_events
from .instrumentor import Instrumentor
from .object_registry import ObjectRegistry
from .params_hash import module_hash


class _Averaged:
    __slots__ = ("id", "updates", "used_at")

    def __init__(self, averaged_id):
        self.id = averaged_id
        self.updates = 0  # update_parameters calls seen on this rank
        self.used_at = None  # the update count of its last averaged_use line


class AveragedModelInstrumentor(Instrumentor):
    """``AveragedModel.update_parameters`` and ``AveragedModel.forward``, wrapped: what they do and
    return is unchanged."""

    NAME = "the averaged model instrumentor"
    MODULE = "torch.optim.swa_utils"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def __init__(self, session):
        super().__init__(session)
        self._models = ObjectRegistry()
        self._ids = itertools.count()

    def _state(self, averaged):
        st = self._models.get(averaged)
        if st is None:
            st = self._models.add(averaged, _Averaged(next(self._ids)))
        return st

    def _instrument(self):
        swa = sys.modules.get(self.MODULE) or importlib.import_module(self.MODULE)
        cls = getattr(swa, "AveragedModel", None)
        if cls is None:
            return
        self._wrap_update(cls)
        self._wrap_forward(cls)

    def _wrap_update(self, cls):
        fn = cls.__dict__.get("update_parameters")
        if fn is None or hasattr(fn, "__ddph_original__"):
            return
        rec, instrumentor = self.session.recorder, self

        @functools.wraps(fn)
        def update_parameters(self, *args, **kwargs):
            out = fn(self, *args, **kwargs)
            if rec.active:
                try:
                    st = instrumentor._state(self)
                    st.updates += 1
                    at, _ = call_site.program_call_site()
                    fields = {"model": st.id, "n": st.updates}
                    if at:
                        fields["at"] = at
                    rec.emit(trace_events.AVERAGED, **fields)
                except Exception as e:
                    rec.fail(e, "averaged model update")
            return out

        update_parameters.__ddph_original__ = fn
        self.patch(cls, "update_parameters", update_parameters)

    def _wrap_forward(self, cls):
        fn = cls.__dict__.get("forward")
        if fn is None or hasattr(fn, "__ddph_original__"):
            return
        rec, instrumentor = self.session.recorder, self

        @functools.wraps(fn)
        def forward(self, *args, **kwargs):
            if rec.active:
                try:
                    st = instrumentor._state(self)
                    if st.used_at != st.updates:
                        st.used_at = st.updates
                        at, _ = call_site.program_call_site()
                        fields = {"model": st.id, "n": st.updates,
                                  "hash": module_hash(self.module)}
                        if at:
                            fields["at"] = at
                        rec.emit(trace_events.AVERAGED_USE, **fields)
                except Exception as e:
                    rec.fail(e, "averaged model forward")
            return fn(self, *args, **kwargs)

        forward.__ddph_original__ = fn
        self.patch(cls, "forward", forward)
