"""The shape every instrumentor of the harness takes (OpenTelemetry's ``BaseInstrumentor``).

An instrumentor owns one concern (the DataLoaders, the CUDA face served by the CPU, the spawned
ranks, ...). Its state lives on the instance; ``instrument()`` patches and ``uninstrument()`` puts
back exactly what was there (an attribute a class only inherited is deleted again, not copied in);
both are idempotent. ``SUPPORTED_TORCH`` declares the torch versions it was written and tested
for: on another version ``instrument()`` still runs, and ``version_note()`` says so in one line.
Every instrumentor is made as ``Cls(session)``: the process's recording session (session.py), or
None when the process does not record; which class instruments which module, and when, is
registry.py's ``INSTRUMENTORS``.
"""

import sys

_MISSING = object()


def torch_version():
    """(major, minor) of the imported torch, or None."""
    torch = sys.modules.get("torch")
    text = getattr(torch, "__version__", "") if torch is not None else ""
    parts = []
    for piece in str(text).split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            return None
        parts.append(int(digits))
    return tuple(parts) if len(parts) == 2 else None


class Instrumentor:
    """Base class: subclasses set ``NAME`` and ``SUPPORTED_TORCH`` and write ``_instrument``."""

    NAME = "instrumentor"
    SUPPORTED_TORCH = ((1, 13), (2, 14))  # the first and last (major, minor) tested, inclusive

    def __init__(self, session=None):
        self.session = session  # session.Session of the recording this one writes to, or None
        self._patches = []  # (owner, name, what owner.__dict__ held or _MISSING)
        self._instrumented = False

    @property
    def instrumented(self):
        return self._instrumented

    def instrument(self):
        if self._instrumented:
            return
        self._instrumented = True
        self._instrument()

    def uninstrument(self):
        if not self._instrumented:
            return
        self._uninstrument()
        for owner, name, held in reversed(self._patches):
            try:
                if held is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, held)
            except (AttributeError, TypeError):
                pass
        self._patches.clear()
        self._instrumented = False

    def version_note(self):
        """None on a supported torch, else one line naming the versions this was tested with."""
        v = torch_version()
        lo, hi = self.SUPPORTED_TORCH
        if v is None or lo <= v <= hi:
            return None
        return "%s was tested with torch %d.%d to %d.%d, not %d.%d" % (
            self.NAME, lo[0], lo[1], hi[0], hi[1], v[0], v[1])

    def patch(self, owner, name, replacement):
        """Sets ``owner.name`` (a module or a class) to ``replacement``, to be put back later.
        Returns the value it replaced (None when there was none)."""
        namespace = getattr(owner, "__dict__", {})
        held = namespace[name] if name in namespace else _MISSING
        previous = getattr(owner, name, None)
        setattr(owner, name, replacement)  # first: an owner that refuses it is not recorded
        self._patches.append((owner, name, held))
        return previous

    def _instrument(self):
        raise NotImplementedError

    def _uninstrument(self):
        """State of the subclass's own to drop once the patches are put back (none by default)."""

