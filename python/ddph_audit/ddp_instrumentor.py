"""DistributedDataParallel: construction, forwards and the gradient allreduce of each bucket.

- ``__init__`` -> a ``ddp`` line (ids in construction order).
- ``forward`` -> a ``forward`` line; when the next backward will reduce gradients, the watch of
  ``ddp_backward_watch`` is armed on the output: DDP's buckets are recorded from autograd
  callbacks, DDP itself runs unchanged (its own reducer, overlap, ``join``, builtin hooks).
- A builtin hook (``_register_builtin_comm_hook``) is left to torch: ALLREDUCE buckets are recorded
  as usual, FP16_COMPRESS ones as float16; another builtin type leaves the module unrecorded.
- A hook the program registers (``register_comm_hook``) is wrapped by a recording hook that writes
  ``coll`` (``"op": "comm_hook"``, ``"hook"``: its qualified name, bucket index, backward count)
  and runs the program's hook; ``coll_done`` is written once its future is seen done (``_watch``).
  A second registration fails as in torch.
- Modules with sparse gradients or a mixed-precision config are not recorded.
"""

import functools
import threading
import weakref

from . import ddp_backward_watch, recorder, trace_events
from .object_registry import ObjectRegistry
from .params_hash import module_hash
from .trace_writer import FLAG, INT, JSON_BOOL, line_format

registry = ObjectRegistry()  # DDP module -> _DDPState
_patched = []
_orig = {}


class _DDPState:
    __slots__ = ("id", "forward_line", "forwards", "backwards", "hook", "user_hooked", "builtin",
                 "watched", "watch")

    def __init__(self, ddp_id):
        self.id = ddp_id
        self.forward_line = line_format(trace_events.FORWARD, {
            "ddp": ddp_id, "n": INT, "training": FLAG, "grad": FLAG, "sync": FLAG})
        self.forwards = 0
        self.backwards = 0
        self.hook = None  # _HookState once ours is registered around the program's hook
        self.user_hooked = False  # the program registered a hook (through us)
        self.builtin = None  # the builtin hook type's name, once one is registered
        self.watched = None  # buckets watched from autograd: decided at a forward after any hook
        self.watch = None  # ddp_backward_watch._Watch, from the module's first watched forward


class _HookState:
    """State passed to the recording hook: the module and the program's own hook."""

    def __init__(self, ddp, st, user_state, user_hook):
        self.ddp_state = st
        self.process_group = getattr(ddp, "process_group", None)
        self.user_state = user_state
        self.user_hook = user_hook  # hook(state, bucket) -> Future
        self.user_name = getattr(user_hook, "__qualname__", None)


def live_hashes():
    """{"<ddp id>": hash} for every live DDP module (the ``params`` of ``epoch`` lines)."""
    out = {}
    for module, st in registry.live():
        out[str(st.id)] = module_hash(module)
    return out


_ends = {}  # key -> (weakref to the DDP module, its state, wrapped module)
_ends_lock = threading.Lock()


def _end_params(key):
    """The ``params`` line of a module at its end: when it is collected or at exit, whichever
    comes first (the weak reference's callback holds the wrapped module, not the DDP wrapper)."""
    with _ends_lock:
        entry = _ends.pop(key, None)
    if entry is None:
        return
    st = entry[1]
    if st.watch is not None:
        st.watch.close()
    if not recorder.is_active():
        return
    try:
        recorder.emit(trace_events.PARAMS, ddp=st.id, hash=module_hash(entry[2]), at="end")
    except Exception as e:
        recorder.fail(e, "params at end")


def _track_end(ddp, st):
    key = object()
    ref = weakref.ref(ddp, lambda _r, key=key: _end_params(key))
    with _ends_lock:
        _ends[key] = (ref, st, ddp.module)


def write_end_params():
    poll_watched()
    with _ends_lock:
        keys = sorted(_ends, key=lambda k: _ends[k][1].id)
    for key in keys:
        _end_params(key)


def _recording_hook(state, bucket):
    """Registered in place of the program's hook (see the module docstring)."""
    from . import distributed_instrumentor as di
    st = state.ddp_state
    token = None
    if recorder.is_active():
        try:
            gid = di.group_id(state.process_group)
            seq = di.next_seq(gid)
            buf = bucket.buffer()
            recorder.emit(trace_events.COLL, group=gid, seq=seq, op="comm_hook",
                          dtype=di.dtype_name(buf.dtype), numel=int(buf.numel()),
                          src="ddp", ddp=st.id, bucket=int(bucket.index()),
                          backward=st.backwards, hook=state.user_name)
            token = (gid, seq)
        except Exception as e:
            recorder.fail(e, "DDP comm hook")
    try:
        if bucket.is_last():
            st.backwards += 1
    except Exception as e:
        recorder.fail(e, "DDP comm hook")
    with recorder.suppressed():  # collectives inside the program's hook belong to this bucket
        fut = state.user_hook(state.user_state, bucket)
    if token is not None:
        _watch(fut, token)
    return fut


# The program's hooks return futures completed by other threads: their ``coll_done`` is written
# when the recorder next writes an event (or at exit) and sees the future done without error, so
# no Python callback of ours runs on a communication thread.
_watched = []
_watch_lock = threading.Lock()


def _watch(fut, token):
    with _watch_lock:
        _watched.append((fut, token))


def poll_watched():
    if not _watched:
        return
    with _watch_lock:
        items = list(_watched)
        still = []
        done = []
        for fut, token in items:
            try:
                if not fut.done():
                    still.append((fut, token))
                    continue
                fut.value()
            except Exception:
                continue  # failed: no coll_done
            done.append(token)
        _watched[:] = still
    for gid, seq in done:
        recorder.emit(trace_events.COLL_DONE, group=gid, seq=seq)


def _make_hook(name):
    """A fresh function per registration so DDP's logger sees the program's hook name."""

    def hook(state, bucket):
        return _recording_hook(state, bucket)

    hook.__qualname__ = name or "ddph_audit_recording_hook"
    hook.__name__ = hook.__qualname__.rsplit(".", 1)[-1]
    return hook


def _has_sparse_or_mixed(ddp):
    if getattr(ddp, "mixed_precision", None) is not None:
        return True
    try:
        for m in ddp.module.modules():
            if getattr(m, "sparse", False) is True:
                return True
    except Exception:
        return True
    return False


# How the buckets of a builtin hook travel (None: as the gradients); other types: not recorded.
_BUILTIN_DTYPE = {"ALLREDUCE": None, "FP16_COMPRESS": "float16"}


def _wrap_init(fn):
    @functools.wraps(fn)
    def __init__(self, *args, **kwargs):
        fn(self, *args, **kwargs)
        if not recorder.state.active or registry.get(self) is not None:
            return
        try:
            st = registry.add(self, _DDPState(recorder.next_id("ddp")))
            params = list(self.module.parameters())
            fields = {"id": st.id, "module": type(self.module).__name__,
                      "parameters": int(sum(p.numel() for p in params))}
            fields["device"] = str(params[0].device) if params else "cpu"
            recorder.emit(trace_events.DDP, **fields)
            _track_end(self, st)
        except Exception as e:
            recorder.fail(e, "DistributedDataParallel.__init__")

    return __init__


def _buckets_watched(ddp, st):
    """Whether the module's buckets are watched from autograd (until a hook is registered)."""
    if st.hook is not None or st.user_hooked:
        return False  # the recording hook records the buckets
    if st.builtin is not None and st.builtin not in _BUILTIN_DTYPE:
        return False
    return not _has_sparse_or_mixed(ddp) and ddp_backward_watch.available()


def _wrap_forward(fn):
    import torch
    is_grad_enabled = torch.is_grad_enabled

    @functools.wraps(fn)
    def forward(self, *inputs, **kwargs):
        st = registry.get(self)
        if st is None or not recorder.state.active:
            return fn(self, *inputs, **kwargs)
        watch = False
        try:
            grad = is_grad_enabled()
            # False under no_sync(): the next backward accumulates without an allreduce.
            sync = bool(getattr(self, "require_backward_grad_sync", True))
            recorder.emit_line(st.forward_line, (st.forwards, JSON_BOOL[bool(self.training)],
                                                 JSON_BOOL[grad], JSON_BOOL[sync]))
            st.forwards += 1
            if st.watched is None:
                st.watched = _buckets_watched(self, st)
            # Decided before DDP's forward: whether the next backward reduces gradients.
            watch = st.watched and grad and sync
        except Exception as e:
            recorder.fail(e, "DistributedDataParallel.forward")
        out = fn(self, *inputs, **kwargs)
        if watch:
            try:
                ddp_backward_watch.watch(self, st, out, _BUILTIN_DTYPE.get(st.builtin))
            except Exception as e:
                recorder.fail(e, "DistributedDataParallel.forward")
        return out

    return forward


def _wrap_register_comm_hook(fn):
    @functools.wraps(fn)
    def register_comm_hook(self, state, hook):
        st = registry.get(self)
        if st is None or recorder.state.failed or st.user_hooked or st.builtin is not None:
            return fn(self, state, hook)  # not ours to record, or torch refuses a second hook
        # Register ours around the program's hook, after torch's own validation of the
        # program's hook (same errors as bare).
        check = getattr(self, "_check_comm_hook", None)
        if check is not None:
            check(hook)
        try:
            hs = _HookState(self, st, state, hook)
            _orig["register_comm_hook"](self, hs, _make_hook(hs.user_name))
        except Exception as e:
            recorder.fail(e, "register_comm_hook")
            return fn(self, state, hook)
        st.hook = hs
        st.user_hooked = True
        st.watched = None
        if poll_watched not in recorder.pollers:  # only then: the other events need no poll
            recorder.pollers.append(poll_watched)
        return None

    return register_comm_hook


def _wrap_register_builtin(fn):
    @functools.wraps(fn)
    def _register_builtin_comm_hook(self, comm_hook_type):
        result = fn(self, comm_hook_type)
        st = registry.get(self)
        if st is not None and st.builtin is None and not st.user_hooked:
            st.builtin = str(comm_hook_type).rsplit(".", 1)[-1]
            st.watched = None
        return result

    return _register_builtin_comm_hook


def patch(parallel_module):
    """Called right after ``torch.nn.parallel`` is imported."""
    DDP = getattr(parallel_module, "DistributedDataParallel", None)
    if DDP is None or getattr(DDP, "__ddph_patched__", False):
        return
    wrappers = {"__init__": _wrap_init, "forward": _wrap_forward,
                "register_comm_hook": _wrap_register_comm_hook,
                "_register_builtin_comm_hook": _wrap_register_builtin}
    for name, make in wrappers.items():
        fn = DDP.__dict__.get(name)
        if fn is None:
            continue
        _orig[name] = fn
        setattr(DDP, name, make(fn))
        _patched.append((DDP, name, fn))
    DDP.__ddph_patched__ = True


def unpatch():
    if poll_watched in recorder.pollers:
        recorder.pollers.remove(poll_watched)
    for _module, st in registry.live():
        if st.watch is not None:
            st.watch.close()
    for cls, name, fn in _patched:
        setattr(cls, name, fn)
        try:
            del cls.__ddph_patched__
        except AttributeError:
            pass
    _patched.clear()
