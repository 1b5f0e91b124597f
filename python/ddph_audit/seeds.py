"""The program's seeds: a ``seed`` line for each call of ``torch.manual_seed``, ``random.seed`` and
``numpy.random.seed`` (the generator, the value, the program's line). Causes then speak of what
was seeded: the same seed before every epoch (an order drawn from the global generator repeats),
a seed per rank. Each wrapper calls what it replaced with the same arguments and returns what it
returned. One per recording session."""

import functools
import sys

from . import call_site, trace_events
from .instrumentor import Instrumentor


def _as_int(value):
    try:
        return int(value)
    except Exception:  # a seed that is no number (random.seed("text"), None: from the clock)
        return None


class SeedInstrumentor(Instrumentor):
    """``torch.manual_seed`` (and ``torch.random.manual_seed``), ``random.seed``,
    ``numpy.random.seed`` when numpy is loaded."""

    NAME = "the seed instrumentor"
    MODULE = "torch"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def _instrument(self):
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "manual_seed"):
            wrapped = self._wrap("torch", torch.manual_seed)
            self.patch(torch, "manual_seed", wrapped)
            if getattr(torch, "random", None) is not None:
                self.patch(torch.random, "manual_seed", wrapped)
        import random
        self.patch(random, "seed", self._wrap("random", random.seed))
        np = sys.modules.get("numpy")
        if np is not None and getattr(np, "random", None) is not None:
            self.patch(np.random, "seed", self._wrap("numpy", np.random.seed))

    def _wrap(self, generator, fn):
        if hasattr(fn, "__ddph_original__"):
            return fn
        rec = self.session.recorder

        @functools.wraps(fn)
        def seed(*args, **kwargs):
            out = fn(*args, **kwargs)
            if rec.active:
                try:
                    fields = {"generator": generator}
                    value = _as_int(args[0]) if args else None
                    if value is not None:
                        fields["value"] = value
                    at, _ = call_site.program_call_site()
                    if at:
                        fields["at"] = at
                    rec.emit(trace_events.SEED, **fields)
                except Exception as e:
                    rec.fail(e, "seed")
            return out

        seed.__ddph_original__ = fn
        return seed
