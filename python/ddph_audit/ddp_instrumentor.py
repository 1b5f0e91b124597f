"""DistributedDataParallel: construction, forwards and the gradient allreduce of each bucket.

``DdpInstrumentor`` wraps these methods of the class (the modules it sees are kept in
``ddp_registry``, their buckets numbered in ``groups``):

- ``__init__`` -> a ``ddp`` line (ids in construction order).
- ``forward`` -> a ``forward`` line; when the next backward will reduce gradients, the watch of
  ``ddp_backward_watch`` is armed on the output: DDP's buckets are recorded from autograd
  callbacks, DDP itself runs unchanged (its own reducer, overlap, ``join``, builtin hooks).
- ``_match_all_reduce_for_bwd_pass`` (torch's ``Join``: a rank out of inputs shadows the others'
  backward) -> its buckets' ``coll`` lines with ``"shadow": true``.
- A builtin hook (``_register_builtin_comm_hook``) is left to torch: ALLREDUCE buckets are recorded
  as usual, FP16_COMPRESS ones as float16; another builtin type leaves the module unrecorded.
- A hook the program registers (``register_comm_hook``) is wrapped by a recording hook that writes
  ``coll`` (``"op": "comm_hook"``, ``"hook"``: its qualified name, bucket index, backward count)
  and runs the program's hook; ``coll_done`` is written once its future is seen done
  (``DdpRegistry.hook_returned``).
  A second registration fails as in torch.
- Modules with sparse gradients or a mixed-precision config are not recorded.
"""

import functools
import importlib
import sys

from . import ddp_backward_watch, trace_events
from .ddp_registry import DdpModuleState
from .groups import dtype_name
from .instrumentor import Instrumentor
from .trace_writer import JSON_BOOL

# How the buckets of a builtin hook travel (None: as the gradients); other types: not recorded.
_BUILTIN_DTYPE = {"ALLREDUCE": None, "FP16_COMPRESS": "float16"}


class _HookState:
    """State passed to the recording hook: the module and the program's own hook."""

    def __init__(self, ddp, st, user_state, user_hook, instrumentor):
        self.ddp_state = st
        self.process_group = getattr(ddp, "process_group", None)
        self.user_state = user_state
        self.user_hook = user_hook  # hook(state, bucket) -> Future
        self.user_name = getattr(user_hook, "__qualname__", None)
        self.instrumentor = instrumentor


def _recording_hook(state, bucket):
    """Registered in place of the program's hook (see the module docstring)."""
    st = state.ddp_state
    me = state.instrumentor
    recorder = me.recorder
    token = None
    if recorder.is_active():
        try:
            gid = me.groups.group_id(state.process_group)
            seq = me.groups.next_seq(gid)
            buf = bucket.buffer()
            recorder.emit(trace_events.COLL, group=gid, seq=seq, op="comm_hook",
                          dtype=dtype_name(buf.dtype), numel=int(buf.numel()),
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
    me.ddp.hook_started()
    fut = None
    try:
        with recorder.suppressed():  # collectives inside the program's hook belong to this bucket
            fut = state.user_hook(state.user_state, bucket)
    finally:
        me.ddp.hook_returned(fut, token if fut is not None else None)
    return fut


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


class DdpInstrumentor(Instrumentor):
    """``DistributedDataParallel``'s construction, forward and hook registration (module
    docstring)."""

    NAME = "the DistributedDataParallel instrumentor"
    MODULE = "torch.nn.parallel"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def __init__(self, session):
        super().__init__(session)
        self.recorder = session.recorder
        self.groups = session.groups
        self.ddp = session.ddp
        self._engine = False  # ddp_backward_watch.autograd_engine(), asked at the first forward

    def _instrument(self):
        parallel = sys.modules.get(self.MODULE) or importlib.import_module(self.MODULE)
        DDP = getattr(parallel, "DistributedDataParallel", None)
        if DDP is None or getattr(DDP, "__ddph_patched__", False):
            return
        wrappers = {"__init__": self._wrap_init, "forward": self._wrap_forward,
                    "_match_all_reduce_for_bwd_pass": self._wrap_join_shadow,
                    "register_comm_hook": self._wrap_register_comm_hook,
                    "_register_builtin_comm_hook": self._wrap_register_builtin}
        for name, make in wrappers.items():
            fn = DDP.__dict__.get(name)
            if fn is not None:
                self.patch(DDP, name, make(fn))
        self.patch(DDP, "__ddph_patched__", True)

    def _uninstrument(self):
        poll, pollers = self.ddp.poll_futures, self.recorder.pollers
        if poll in pollers:
            pollers.remove(poll)
        self.ddp.close_watches()

    def engine(self):
        if self._engine is False:
            self._engine = ddp_backward_watch.autograd_engine()
        return self._engine

    def _wrap_init(self, fn):
        registry, recorder = self.ddp, self.recorder

        @functools.wraps(fn)
        def __init__(self, *args, **kwargs):
            fn(self, *args, **kwargs)
            if not recorder.active or registry.get(self) is not None:
                return
            try:
                st = DdpModuleState(recorder.next_id("ddp"))
                registry.add(self, st)
                params = list(self.module.parameters())
                fields = {"id": st.id, "module": type(self.module).__name__,
                          "parameters": int(sum(p.numel() for p in params))}
                fields["device"] = str(params[0].device) if params else "cpu"
                # DDP's forward broadcasts these from rank 0 (a collective in every forward).
                fields["buffers"] = (len(list(self.module.buffers()))
                                     if getattr(self, "broadcast_buffers", False) else 0)
                recorder.emit(trace_events.DDP, **fields)
            except Exception as e:
                recorder.fail(e, "DistributedDataParallel.__init__")

        return __init__

    def _buckets_watched(self, ddp, st):
        """Whether the module's buckets are watched from autograd (until a hook is registered)."""
        if st.hook is not None or st.user_hooked:
            return False  # the recording hook records the buckets
        if st.builtin is not None and st.builtin not in _BUILTIN_DTYPE:
            return False
        return not _has_sparse_or_mixed(ddp) and self.engine() is not None

    def _wrap_forward(self, fn):
        import torch
        is_grad_enabled = torch.is_grad_enabled
        registry, groups, me, recorder = self.ddp, self.groups, self, self.recorder

        @functools.wraps(fn)
        def forward(self, *inputs, **kwargs):
            st = registry.get(self)
            if st is None or not recorder.active:
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
                    st.watched = me._buckets_watched(self, st)
                # Decided before DDP's forward: whether the next backward reduces gradients.
                watch = st.watched and grad and sync
            except Exception as e:
                recorder.fail(e, "DistributedDataParallel.forward")
            out = fn(self, *inputs, **kwargs)
            if watch:
                try:
                    ddp_backward_watch.watch(self, st, out, _BUILTIN_DTYPE.get(st.builtin),
                                             groups, me._engine)
                except Exception as e:
                    recorder.fail(e, "DistributedDataParallel.forward")
            return out

        return forward

    def _wrap_join_shadow(self, fn):
        """Under torch's ``Join``, a rank that ran out of inputs shadows the others' backward: one
        allreduce of zeros per gradient bucket, outside autograd. Written as the bucket lines of
        a backward, with ``"shadow": true`` (a recording hook records them itself)."""
        registry, groups, recorder = self.ddp, self.groups, self.recorder

        @functools.wraps(fn)
        def _match_all_reduce_for_bwd_pass(self):
            st = registry.get(self)
            if st is None or not st.watched or not recorder.active:
                return fn(self)
            lines = None
            try:
                gid = groups.group_id(getattr(self, "process_group", None))
                buckets = [b.buffer() for b in self.reducer._get_zeros_like_grad_buckets()]
                first = groups.next_seqs(gid, len(buckets))
                backward = st.backwards  # the backwards it shadows are the others', not its own
                for i, buf in enumerate(buckets):
                    recorder.emit(trace_events.COLL, group=gid, seq=first + i, op="all_reduce",
                                  dtype=dtype_name(buf.dtype), numel=int(buf.numel()), src="ddp",
                                  ddp=st.id, bucket=i, backward=backward, shadow=True)
                lines = (gid, first, len(buckets))
            except Exception as e:
                recorder.fail(e, "DistributedDataParallel (Join's shadow of a backward)")
            result = fn(self)
            if lines is not None:
                gid, first, n = lines
                for seq in range(first, first + n):
                    recorder.emit(trace_events.COLL_DONE, group=gid, seq=seq)
            return result

        return _match_all_reduce_for_bwd_pass

    def _wrap_register_comm_hook(self, fn):
        registry, me, recorder = self.ddp, self, self.recorder

        @functools.wraps(fn)
        def register_comm_hook(self, state, hook):
            st = registry.get(self)
            if st is None or recorder.failed or st.user_hooked or st.builtin is not None:
                return fn(self, state, hook)  # not ours to record, or torch refuses a second hook
            # Register ours around the program's hook, after torch's own validation of the
            # program's hook (same errors as bare).
            check = getattr(self, "_check_comm_hook", None)
            if check is not None:
                check(hook)
            try:
                hs = _HookState(self, st, state, hook, me)
                fn(self, hs, _make_hook(hs.user_name))
            except Exception as e:
                recorder.fail(e, "register_comm_hook")
                return fn(self, state, hook)
            st.hook = hs
            st.user_hooked = True
            st.watched = None
            poll = registry.poll_futures
            if poll not in recorder.pollers:  # only then: the other events need no poll
                recorder.pollers.append(poll)
            return None

        return register_comm_hook

    def _wrap_register_builtin(self, fn):
        registry = self.ddp

        @functools.wraps(fn)
        def _register_builtin_comm_hook(self, comm_hook_type):
            result = fn(self, comm_hook_type)
            st = registry.get(self)
            if st is not None and st.builtin is None and not st.user_hooked:
                st.builtin = str(comm_hook_type).rsplit(".", 1)[-1]
                st.watched = None
            return result

        return _register_builtin_comm_hook
