"""DistributedDataParallel: construction, forwards and the gradient allreduce of each bucket.

- ``__init__`` -> a ``ddp`` line (ids in construction order).
- ``forward`` -> a ``forward`` line. At the module's first forward, if the program registered no
  comm hook, a recording hook is registered (lazily, so that a program registering its own hook
  before training is not refused: DDP accepts one hook only).
- The recording hook writes ``coll`` (``src: ddp``, bucket index, backward count) then does what
  DDP does without a hook: the bucket is multiplied by 1/group size (the reducer's own arithmetic,
  ``grad * (1/W)``, which is bit-identical to the bare run for every W; ``allreduce_hook``'s
  ``div_`` is not for W=3) and allreduced (sum); ``coll_done`` is written when the future completes.
- A hook the program registers (``register_comm_hook``) runs inside the recording hook instead of
  the default (``coll`` then has ``"op": "comm_hook"`` and ``"hook"``: its qualified name). If it is
  registered after the first forward (ours is already in place) it replaces the default in ours:
  the program sees the same behaviour. A second registration fails as in torch.
- ``_register_builtin_comm_hook`` before the first forward: left alone, no bucket is recorded for
  that module. After it: emulated in Python inside ours (ALLREDUCE -> the default above,
  FP16_COMPRESS -> torch's ``fp16_compress_hook``).
- Modules with sparse gradients or a mixed-precision config get no recording hook.
"""

import functools
import threading
import weakref

from . import recorder
from .object_registry import ObjectRegistry
from .params_hash import module_hash

registry = ObjectRegistry()  # DDP module -> _DDPState
_patched = []
_orig = {}


class _DDPState:
    __slots__ = ("id", "forwards", "backwards", "hook", "user_hooked", "builtin", "lock")

    def __init__(self, ddp_id):
        self.id = ddp_id
        self.forwards = 0
        self.backwards = 0
        self.hook = None  # _HookState once ours is registered
        self.user_hooked = False  # the program registered a hook (through us)
        self.builtin = False  # a builtin hook was registered before ours
        self.lock = threading.Lock()


class _HookState:
    """State passed to the recording hook: the module and, maybe, the program's own hook."""

    def __init__(self, ddp, st):
        self.ddp_state = st
        self.process_group = getattr(ddp, "process_group", None)
        self.user_state = None
        self.user_hook = None  # hook(state, bucket) -> Future
        self.user_name = None
        # bucket index -> the last buffer handed to a gloo allreduce, kept referenced from Python
        # until the next one (NOTE [Buffers outlive the gloo work] in _default_hook).
        self.buffers = {}


def live_hashes():
    """{"<ddp id>": hash} for every live DDP module (the ``params`` of ``epoch`` lines)."""
    out = {}
    for module, st in registry.live():
        out[str(st.id)] = module_hash(module)
    return out


_ends = {}  # key -> (weakref to the DDP module, ddp id, wrapped module)
_ends_lock = threading.Lock()


def _end_params(key):
    """The ``params`` line of a module at its end: when it is collected or at exit, whichever
    comes first (the weak reference's callback holds the wrapped module, not the DDP wrapper)."""
    with _ends_lock:
        entry = _ends.pop(key, None)
    if entry is None or not recorder.is_active():
        return
    try:
        recorder.emit("params", ddp=entry[1], hash=module_hash(entry[2]), at="end")
    except Exception as e:
        recorder.fail(e, "params at end")


def _track_end(ddp, ddp_id):
    key = object()
    ref = weakref.ref(ddp, lambda _r, key=key: _end_params(key))
    with _ends_lock:
        _ends[key] = (ref, ddp_id, ddp.module)


def write_end_params():
    poll_watched()
    with _ends_lock:
        keys = sorted(_ends, key=lambda k: _ends[k][1])
    for key in keys:
        _end_params(key)


def _default_hook(process_group, bucket, on_done, buffers):
    import torch
    dist = _dist()
    from . import distributed_instrumentor as di
    group = process_group if process_group is not None else dist.group.WORLD
    tensor = bucket.buffer()
    # NOTE [Buffers outlive the gloo work]: `tensor` has a Python object (bucket.buffer() made
    # one), and gloo's worker thread drops its reference to the work, and so to the tensor, a
    # moment after wait() returns. Were that the last reference, the worker would need the GIL
    # to free the Python object; at the end of a run the interpreter may be finalizing by then,
    # and the thread's exit through a noexcept destructor aborts the process ("terminate called
    # without an active exception", seen once under load). Held here until the bucket's next
    # allreduce, the worker's reference is never the last. docs/audit.md, "The recorder".
    buffers[bucket.index()] = tensor
    # What the reducer does without a hook: bucket = grad * (1 / W) (mul_out with a wrapped scalar).
    tensor.mul_(1.0 / group.size())
    work = di.original("all_reduce")(tensor, group=group, async_op=True)
    if tensor.is_cuda:
        # NCCL completes CUDA futures at once (stream semantics): the callback runs in this thread.
        def done(f):
            value = f.value()[0]
            on_done()
            return value

        return work.get_future().then(done)
    # CPU (gloo): wait here. A Python callback run by a gloo thread can deadlock or abort the
    # interpreter at exit (seen with torch's own allreduce_hook on 1.13); a CPU backward does not
    # overlap much with communication anyway.
    try:
        work.wait()
    except Exception:
        # Hand DDP the failed future itself: the program sees torch's own error, unchanged.
        return work.get_future()
    on_done()
    fut = torch.futures.Future()
    fut.set_result(tensor)
    return fut


def _dist():
    import torch.distributed as dist
    return dist


def _recording_hook(state, bucket):
    """The comm hook registered on every DDP module (see the module docstring)."""
    from . import distributed_instrumentor as di
    st = state.ddp_state
    token = None
    if recorder.is_active():
        try:
            gid = di.group_id(state.process_group)
            seq = di.next_seq(gid)
            buf = bucket.buffer()
            fields = {"group": gid, "seq": seq,
                      "op": "all_reduce" if state.user_hook is None else "comm_hook",
                      "dtype": str(buf.dtype).replace("torch.", ""), "numel": int(buf.numel()),
                      "src": "ddp", "ddp": st.id, "bucket": int(bucket.index()),
                      "backward": st.backwards}
            if state.user_hook is not None:
                fields["hook"] = state.user_name
            recorder.emit("coll", **fields)
            token = (gid, seq)
        except Exception as e:
            recorder.fail(e, "DDP comm hook")
    try:
        if bucket.is_last():
            st.backwards += 1
    except Exception as e:
        recorder.fail(e, "DDP comm hook")

    def on_done():
        if token is not None:
            recorder.emit("coll_done", group=token[0], seq=token[1])

    if state.user_hook is None:
        return _default_hook(state.process_group, bucket, on_done, state.buffers)
    tls = recorder.tls
    d = getattr(tls, "depth", 0)
    tls.depth = d + 1  # collectives inside the program's hook belong to this bucket
    try:
        fut = state.user_hook(state.user_state, bucket)
    finally:
        tls.depth = d
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
        recorder.emit("coll_done", group=gid, seq=seq)


def _make_hook(name):
    """A fresh function per registration so DDP's logger sees the program's hook name."""

    def hook(state, bucket):
        return _recording_hook(state, bucket)

    hook.__qualname__ = name or "ddph_audit_allreduce_hook"
    hook.__name__ = hook.__qualname__.rsplit(".", 1)[-1]
    return hook


def _state_of(ddp):
    return registry.get(ddp)


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


def _register_ours(ddp, st, user=None):
    hs = _HookState(ddp, st)
    name = None
    if user is not None:
        hs.user_state, hs.user_hook = user
        name = getattr(hs.user_hook, "__qualname__", None)
        hs.user_name = name
    _orig["register_comm_hook"](ddp, hs, _make_hook(name))
    st.hook = hs


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
            recorder.emit("ddp", **fields)
            _track_end(self, st.id)
        except Exception as e:
            recorder.fail(e, "DistributedDataParallel.__init__")

    return __init__


def _wrap_forward(fn):
    @functools.wraps(fn)
    def forward(self, *inputs, **kwargs):
        st = registry.get(self)
        if st is not None and recorder.state.active:
            try:
                import torch
                recorder.emit("forward", ddp=st.id, n=st.forwards, training=bool(self.training),
                              grad=bool(torch.is_grad_enabled()))
                st.forwards += 1
                if st.hook is None and not st.user_hooked and not st.builtin \
                        and not _has_sparse_or_mixed(self):
                    _register_ours(self, st)
            except Exception as e:
                recorder.fail(e, "DistributedDataParallel.forward")
        return fn(self, *inputs, **kwargs)

    return forward


def _wrap_register_comm_hook(fn):
    @functools.wraps(fn)
    def register_comm_hook(self, state, hook):
        st = registry.get(self)
        if st is None or recorder.state.failed or st.user_hooked or st.builtin:
            return fn(self, state, hook)
        if st.hook is None:
            # Before the first forward: register ours around the program's hook, after torch's
            # own validation of the program's hook (same errors as bare).
            check = getattr(self, "_check_comm_hook", None)
            if check is not None:
                check(hook)
            try:
                _register_ours(self, st, (state, hook))
            except Exception as e:
                if st.hook is None:
                    recorder.fail(e, "register_comm_hook")
                    return fn(self, state, hook)
                raise
            st.user_hooked = True
            return None
        # Ours is already registered (after the first forward): swap the program's hook in.
        check = getattr(self, "_check_comm_hook", None)
        if check is not None:
            check(hook)
        st.hook.user_state, st.hook.user_hook = state, hook
        st.hook.user_name = getattr(hook, "__qualname__", None)
        st.user_hooked = True
        return None

    return register_comm_hook


def _wrap_register_builtin(fn):
    @functools.wraps(fn)
    def _register_builtin_comm_hook(self, comm_hook_type):
        st = registry.get(self)
        if st is None or recorder.state.failed or st.user_hooked or st.builtin or st.hook is None:
            if st is not None:
                st.builtin = True
            return fn(self, comm_hook_type)
        # Ours is in place: emulate the builtin hook in Python.
        dist = _dist()
        name = str(comm_hook_type).rsplit(".", 1)[-1]
        if name == "ALLREDUCE":
            st.builtin = True
            return None
        if name == "FP16_COMPRESS":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            st.hook.user_state = st.hook.process_group
            st.hook.user_hook = default_hooks.fp16_compress_hook
            st.hook.user_name = "FP16_COMPRESS"
            st.builtin = True
            return None
        return fn(self, comm_hook_type)  # unknown type: let torch answer

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
    if poll_watched not in recorder.pollers:
        recorder.pollers.append(poll_watched)


def unpatch():
    if poll_watched in recorder.pollers:
        recorder.pollers.remove(poll_watched)
    for cls, name, fn in _patched:
        setattr(cls, name, fn)
        try:
            del cls.__ddph_patched__
        except AttributeError:
            pass
    _patched.clear()
