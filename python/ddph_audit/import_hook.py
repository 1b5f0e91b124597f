"""Post-import hooks: run a callback right after a module (e.g. ``torch.distributed``) executes.

A ``sys.meta_path`` finder answers only for the watched names: it asks the other finders for the
real spec and wraps its loader so that, once the module has executed, the callback runs (before the
importing statement returns, so ``from torch.distributed import all_reduce`` in the user's script
already gets the patched function). Nothing is imported by the hook itself: a process that never
imports torch pays one dictionary lookup per import. ``ImportHooks`` is one owner's set of hooks
(the registry's Instrumentation); its finder is on ``sys.meta_path`` while it has a callback.
"""

import sys
import threading


class _ChainedLoader:
    def __init__(self, loader, name, hooks):
        self._loader = loader
        self._name = name
        self._hooks = hooks

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
        self._hooks.fire(self._name, module)


class _Finder:
    def __init__(self, hooks):
        self._hooks = hooks
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if not self._hooks.watches(fullname):
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
        spec.loader = _ChainedLoader(spec.loader, fullname, self._hooks)
        return spec

    def invalidate_caches(self):
        pass


class ImportHooks:
    """Callbacks run once their module is imported. Callbacks catch their own errors."""

    def __init__(self):
        self._lock = threading.RLock()
        self._callbacks = {}  # module name -> [callback(module)]
        self._done = set()
        self._finder = None

    def watches(self, name):
        return name in self._callbacks and name not in self._done

    def fire(self, name, module):
        with self._lock:
            if name in self._done:
                return
            self._done.add(name)
            callbacks = list(self._callbacks.get(name, ()))
        for cb in callbacks:
            cb(module)

    def when_imported(self, name, callback):
        """Runs ``callback(module)`` once ``name`` is imported (now if it already is)."""
        module = sys.modules.get(name)
        if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing",
                                              False):
            callback(module)
            return
        with self._lock:
            self._callbacks.setdefault(name, []).append(callback)
            self._done.discard(name)
            if self._finder is None:
                self._finder = _Finder(self)
                sys.meta_path.insert(0, self._finder)

    def cancel(self, name, callback):
        """Forgets ``callback`` of ``name`` (run or not); the finder goes once none is left."""
        with self._lock:
            callbacks = self._callbacks.get(name, [])
            if callback in callbacks:
                callbacks.remove(callback)
            if not callbacks:
                self._callbacks.pop(name, None)
                self._done.discard(name)
            if self._callbacks or self._finder is None:
                return
            try:
                sys.meta_path.remove(self._finder)
            except ValueError:
                pass
            self._finder = None
