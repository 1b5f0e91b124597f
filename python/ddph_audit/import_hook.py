"""Post-import hooks: run a callback right after a module (e.g. ``torch.distributed``) executes.

A ``sys.meta_path`` finder answers only for the watched names: it asks the other finders for the
real spec and wraps its loader so that, once the module has executed, the callback runs (before the
importing statement returns, so ``from torch.distributed import all_reduce`` in the user's script
already gets the patched function). Nothing is imported by the hook itself: a process that never
imports torch pays one dictionary lookup per import.
"""

import sys
import threading

_lock = threading.RLock()
_callbacks = {}  # module name -> [callback(module)]
_done = set()
_finder = None


class _ChainedLoader:
    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def __getattr__(self, attr):
        return getattr(self._loader, attr)

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        loader = self._loader
        # Give the module its real loader back before it runs (pkgutil/importlib.resources users).
        try:
            module.__loader__ = loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = loader
        except Exception:
            pass
        loader.exec_module(module)
        _fire(self._name, module)


class _Finder:
    def __init__(self):
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _callbacks or fullname in _done:
            return None
        if getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ChainedLoader(spec.loader, fullname)
        return spec

    def invalidate_caches(self):
        pass


def _fire(name, module):
    with _lock:
        if name in _done:
            return
        _done.add(name)
        callbacks = list(_callbacks.get(name, ()))
    for cb in callbacks:
        cb(module)  # callbacks catch their own errors


def when_imported(name, callback):
    """Runs ``callback(module)`` once ``name`` is imported (now if it already is)."""
    global _finder
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        callback(module)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        _done.discard(name)
        if _finder is None:
            _finder = _Finder()
            sys.meta_path.insert(0, _finder)


def remove():
    """Removes the finder and forgets the callbacks not yet run."""
    global _finder
    with _lock:
        if _finder is not None:
            try:
                sys.meta_path.remove(_finder)
            except ValueError:
                pass
        _finder = None
        _callbacks.clear()
        _done.clear()
