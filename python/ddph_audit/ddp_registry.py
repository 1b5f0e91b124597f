"""The DDP modules this rank made, and what the recorder keeps about each.

A shared service: the DDP instrumentor adds each module it sees constructed and counts its
forwards and backwards here; the data instrumentor reads the live modules' parameter hashes (the
``params`` of ``epoch`` lines), the distributed one which modules are alive at
``destroy_process_group``, and the process hooks write every module's final ``params`` line at
exit. One per recording session (session.py), written through its recorder.
"""

import threading
import weakref

from . import trace_events
from .object_registry import ObjectRegistry
from .params_hash import gradient_hash, module_hash, parts
from .trace_writer import FLAG, INT, line_format


class DdpModuleState:
    """What is recorded of one DDP module (written by the DDP instrumentor, on the threads that
    run its forwards and its backward's callbacks: one module's are never concurrent)."""

    __slots__ = ("id", "forward_line", "forwards", "backwards", "hook", "user_hooked", "builtin",
                 "watched", "watch", "reduced")

    def __init__(self, ddp_id):
        self.id = ddp_id
        self.forward_line = line_format(trace_events.FORWARD, {
            "ddp": ddp_id, "n": INT, "training": FLAG, "grad": FLAG, "sync": FLAG})
        self.forwards = 0
        self.backwards = 0
        self.hook = None  # the recording hook's state once ours is registered around the program's
        self.user_hooked = False  # the program registered a hook (through us)
        self.builtin = None  # the builtin hook type's name, once one is registered
        self.watched = None  # buckets watched from autograd: decided at a forward after any hook
        self.watch = None  # ddp_backward_watch.Watch, from the module's first watched forward
        self.reduced = None  # ids of the parameters that required gradients when it was added


class DdpRegistry:
    """DDP modules (held weakly) -> DdpModuleState, their final ``params`` lines, and the futures
    of the program's comm hooks whose ``coll_done`` is still to be written."""

    def __init__(self, recorder):
        self.recorder = recorder  # recorder.Recorder: the params and coll_done lines
        self._modules = ObjectRegistry()
        self._ends = {}  # key -> (weakref to the DDP module, its state, wrapped module)
        self._ends_lock = threading.Lock()
        # The program's hooks return futures completed by other threads: their ``coll_done`` is
        # written when the recorder next writes an event (or at exit) and sees the future done
        # without error, so no Python callback of ours runs on a communication thread.
        self._futures = []
        self._futures_lock = threading.Lock()
        self._hooks_running = 0  # program hooks called whose future is not watched yet

    def get(self, ddp):
        return self._modules.get(ddp)

    def add(self, ddp, st):
        """Registers ``ddp`` and writes its ``params`` line at its end (collected or exit)."""
        self._modules.add(ddp, st)
        # DDP reduces the gradients of the parameters that required them when it was built; one
        # made trainable later (an unfreeze) keeps each rank's own gradient.
        st.reduced = frozenset(id(p) for p in ddp.parameters() if p.requires_grad)
        key = object()
        ref = weakref.ref(ddp, lambda _r, key=key: self._end_params(key))
        with self._ends_lock:
            self._ends[key] = (ref, st, ddp.module)
        return st

    def live(self):
        """[(module, state)] of the modules still alive, in construction order."""
        return self._modules.live()

    def live_ids(self):
        return sorted(st.id for m, st in self._modules.live() if getattr(m, "module", None) is not m)

    def live_hashes(self):
        """{"<ddp id>": hash} for every live DDP module (the ``params`` of ``epoch`` lines)."""
        out = {}
        for module, st in self._modules.live():
            out[str(st.id)] = module_hash(module)
        return out

    def live_gradient_hashes(self):
        """{"<ddp id>": hash of its gradients} for every live DDP module (a ``step``'s ``grads``)."""
        return {str(st.id): gradient_hash(module, st.reduced) for module, st in self._modules.live()}

    def close_watches(self):
        """Removes every live module's backward watch (recording stops)."""
        for _module, st in self._modules.live():
            if st.watch is not None:
                st.watch.close()

    def _end_params(self, key):
        """The ``params`` line of a module at its end: when it is collected or at exit, whichever
        comes first (the weak reference's callback holds the wrapped module, not the wrapper)."""
        with self._ends_lock:
            entry = self._ends.pop(key, None)
        if entry is None:
            return
        st = entry[1]
        if st.watch is not None:
            st.watch.close()
        rec = self.recorder
        if not rec.is_active():
            return
        try:
            rec.emit(trace_events.PARAMS, ddp=st.id, hash=module_hash(entry[2]), at="end",
                     **parts(entry[2]))
        except Exception as e:
            rec.fail(e, "params at end")

    def write_end_params(self):
        """At exit: the hooks' completed futures, then each live module's final ``params``."""
        self.poll_futures()
        with self._ends_lock:
            keys = sorted(self._ends, key=lambda k: self._ends[k][1].id)
        for key in keys:
            self._end_params(key)

    def hook_started(self):
        """A program's comm hook is being called: until its future is watched, a callback of its
        may already run on another thread (a ``then`` on a future that completed at once)."""
        with self._futures_lock:
            self._hooks_running += 1

    def hook_returned(self, fut, token):
        """The hook returned ``fut``: its ``coll_done`` is written once it is seen done without
        error (``poll_futures``); it is watched before the hook stops counting as running, so
        that no moment is left in which its callbacks would look like the program's."""
        with self._futures_lock:
            if token is not None:
                self._futures.append((fut, token))
            self._hooks_running -= 1

    def hook_pending(self):
        """Whether some comm hook is running or its future is not done yet: the collectives its
        callbacks make on other threads (PowerSGD's second all_reduce, in a ``then``) belong to
        its bucket."""
        with self._futures_lock:
            if self._hooks_running:
                return True
            for fut, _token in self._futures:
                try:
                    if not fut.done():
                        return True
                except Exception:  # a future that cannot say: count it as pending
                    return True
        return False

    def poll_futures(self):
        if not self._futures:
            return
        with self._futures_lock:
            still = []
            done = []
            for fut, token in self._futures:
                try:
                    if not fut.done():
                        still.append((fut, token))
                        continue
                    fut.value()
                except Exception:
                    continue  # failed: no coll_done
                done.append(token)
            self._futures[:] = still
        for gid, seq in done:
            self.recorder.emit(trace_events.COLL_DONE, group=gid, seq=seq)

