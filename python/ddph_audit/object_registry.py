"""Per-object state for user objects (samplers, loaders, DDP modules) without touching them.

Keyed by ``id(obj)`` with a weak reference when the object allows one (a strong one otherwise,
e.g. for classes with ``__slots__``), so unhashable objects work and nothing is set on them."""

import threading
import weakref


class ObjectRegistry:
    def __init__(self):
        self._entries = {}  # id -> (ref, state)
        self._lock = threading.Lock()

    def get(self, obj):
        entry = self._entries.get(id(obj))
        if entry is not None and entry[0]() is obj:
            return entry[1]
        return None

    def add(self, obj, state):
        key = id(obj)
        try:
            ref = weakref.ref(obj, lambda _r, key=key, d=self._entries: self._drop(key, _r))
        except TypeError:
            ref = (lambda o: (lambda: o))(obj)
        with self._lock:
            self._entries[key] = (ref, state)
        return state

    def _drop(self, key, ref):
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is ref:
                del self._entries[key]

    def live(self):
        """[(obj, state)] of the objects still alive, in insertion order."""
        with self._lock:
            entries = list(self._entries.values())
        out = []
        for ref, state in entries:
            obj = ref()
            if obj is not None:
                out.append((obj, state))
        return out
