"""torch.distributed: collectives, point-to-point calls, process groups.

``DistributedInstrumentor`` replaces each public function listed in ``COLLECTIVES``, in
``torch.distributed`` and in ``torch.distributed.distributed_c10d``, by a wrapper that writes
``coll`` before the call and ``coll_done`` once it returned (for ``async_op=True`` / ``isend`` /
``irecv``: when the call returned, with ``"async": true``). Only the outermost call is recorded
(``all_gather_object`` calls ``all_gather`` inside; ``init_process_group`` and ``new_group`` may
call ``barrier``): the wrapped call runs inside ``recorder.suppressed()``. ``seq`` counts this
rank's recorded calls per group (``groups.py``). Every ``all_reduce``'s tensor is shown to
``grad_sync.HandAveraging``: a loop that averages gradients itself declares its
optimizer's parameters a replica there.
"""

import functools
import importlib
import inspect
import sys
import threading

from .call_site import list_display_argument, program_call_site
from . import trace_events
from .groups import dtype_name
from .instrumentor import Instrumentor

COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "broadcast", "all_to_all",
    "all_to_all_single", "barrier", "gather", "scatter", "send", "recv", "isend", "irecv",
    "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
    "monitored_barrier", "all_reduce_coalesced", "all_gather_coalesced", "batch_isend_irecv",
)
ALWAYS_ASYNC = ("isend", "irecv", "batch_isend_irecv")
# Which argument holds the tensor describing this rank's contribution (dtype, numel).
TENSOR_ARG = {
    "all_reduce": "tensor", "all_gather": "tensor", "all_gather_into_tensor": "input_tensor",
    "_all_gather_base": "input_tensor", "reduce": "tensor", "reduce_scatter": "input_list",
    "reduce_scatter_tensor": "input", "_reduce_scatter_base": "input", "broadcast": "tensor",
    "all_to_all": "input_tensor_list", "all_to_all_single": "input", "gather": "tensor",
    "scatter": "tensor", "send": "tensor", "recv": "tensor", "isend": "tensor", "irecv": "tensor",
    "all_reduce_coalesced": "tensors", "all_gather_coalesced": "input_tensor_list",
}
PEER_ARG = {"send": "dst", "isend": "dst", "recv": "src", "irecv": "src"}
ROOT_ARG = {"broadcast": "src", "reduce": "dst", "gather": "dst", "scatter": "src",
            "broadcast_object_list": "src", "gather_object": "dst", "scatter_object_list": "src"}


def _describe_tensor(obj):
    """(dtype, numel) of a tensor or a list of tensors; (None, None) otherwise."""
    try:
        if isinstance(obj, (list, tuple)):
            if not obj:
                return None, 0
            numel = 0
            for t in obj:
                numel += int(t.numel())
            return dtype_name(obj[0].dtype), numel
        if obj is not None and hasattr(obj, "numel") and hasattr(obj, "dtype"):
            return dtype_name(obj.dtype), int(obj.numel())
    except Exception:
        pass
    return None, None


# NOTE [What a metric summed] (docs/audit.md): the result of a synchronous all_reduce this small
# is a metric's sums (correct, seen): the audit compares them with the samples evaluated.
_SMALL_RESULT = 16


def _small_result(name, tensor):
    """The values of an all_reduce's result of at most _SMALL_RESULT elements, or None."""
    if name != "all_reduce" or tensor is None:
        return None
    try:
        if tensor.numel() > _SMALL_RESULT or tensor.is_complex():
            return None
        out = []
        for x in tensor.detach().reshape(-1).tolist():
            x = float(x)
            if x != x or x in (float("inf"), float("-inf")):
                return None
            out.append(int(x) if x.is_integer() else round(x, 6))
        return out
    except Exception:  # a tensor with no values here (meta, sparse): nothing to say
        return None


def _arg_getter(fn):
    """Returns get(args, kwargs, name, default) using the function's signature."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    pos = {p: i for i, p in enumerate(params)}

    def get(args, kwargs, name, default=None):
        if name in kwargs:
            return kwargs[name]
        i = pos.get(name)
        if i is not None and i < len(args):
            return args[i]
        return default

    return get


_REDUCE_NAMES = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")


def _reduce_op_name(op, c10d):
    if op is None:
        return "SUM"
    ReduceOp = getattr(c10d, "ReduceOp", None)
    for n in _REDUCE_NAMES:
        v = getattr(ReduceOp, n, None)
        if v is None:
            continue
        try:
            if op is v or op == v:
                return n
        except Exception:
            pass
    return str(op).rsplit(".", 1)[-1]


class DistributedInstrumentor(Instrumentor):
    """The collectives and process-group calls of ``torch.distributed`` (module docstring)."""

    NAME = "the torch.distributed instrumentor"
    MODULE = "torch.distributed"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def __init__(self, session):
        super().__init__(session)
        self.recorder = session.recorder
        self.groups = session.groups
        self.ddp = session.ddp  # which DDP modules are alive
        self.averaging = session.averaging  # the program's own gradient averaging
        self.dist = None
        self.c10d = None

    def _instrument(self):
        dist = sys.modules.get(self.MODULE) or importlib.import_module(self.MODULE)
        if not getattr(dist, "is_available", lambda: False)():
            return
        self.dist = dist
        self.c10d = getattr(dist, "distributed_c10d", None)
        if self.c10d is None:
            self.c10d = importlib.import_module("torch.distributed.distributed_c10d")
        self.groups.c10d = self.c10d
        for name in COLLECTIVES:
            fn = getattr(self.c10d, name, None) or getattr(dist, name, None)
            if fn is None or hasattr(fn, "__ddph_original__"):
                continue
            self._set_everywhere(name, fn, self._wrap_collective(name, fn))
        for name, after, before in (("init_process_group", self._after_init, None),
                                    ("new_group", self._after_new_group, self._before_new_group),
                                    ("destroy_process_group", None, self._before_destroy)):
            fn = getattr(self.c10d, name, None)
            if fn is None or hasattr(fn, "__ddph_original__"):
                continue
            self._set_everywhere(name, fn, self._wrap_suppressing(name, fn, after, before))
        # Already initialised (instrument() called late): the rank is known now.
        try:
            self._after_init((), {}, None)
        except Exception:
            pass

    def _set_everywhere(self, name, fn, wrapper):
        for mod in (self.dist, self.c10d):
            if getattr(mod, name, None) is fn:
                self.patch(mod, name, wrapper)

    def _wrap_collective(self, name, fn):
        get = _arg_getter(fn)
        tensor_arg = TENSOR_ARG.get(name)
        peer_arg = PEER_ARG.get(name)
        root_arg = ROOT_ARG.get(name)
        always_async = name in ALWAYS_ASYNC
        recorder = self.recorder
        inside = recorder.suppressed()
        begin = self._begin

        in_a_hook = self._in_a_hook

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if inside.active() or not recorder.active or in_a_hook():
                with inside:
                    return fn(*args, **kwargs)
            token = None
            try:
                token = begin(name, args, kwargs, get, tensor_arg, peer_arg, root_arg, always_async)
            except Exception as e:
                recorder.fail(e, name)
            with inside:
                result = fn(*args, **kwargs)
            if token is not None:
                try:
                    gid, seq, is_async = token
                    if is_async:
                        recorder.emit(trace_events.COLL_DONE, group=gid, seq=seq, **{"async": True})
                    else:
                        values = _small_result(name, get(args, kwargs, tensor_arg))
                        if values is None:
                            recorder.emit(trace_events.COLL_DONE, group=gid, seq=seq)
                        else:
                            recorder.emit(trace_events.COLL_DONE, group=gid, seq=seq,
                                          values=values)
                except Exception as e:
                    recorder.fail(e, name)
            return result

        wrapper.__ddph_original__ = fn
        return wrapper

    def _in_a_hook(self):
        """A collective made off the main thread while a DDP comm hook's future is pending: a
        callback of the hook's (``fut.then``), part of its bucket, not a call of the program's."""
        return threading.current_thread() is not threading.main_thread() and self.ddp.hook_pending()

    def _begin(self, name, args, kwargs, get, tensor_arg, peer_arg, root_arg, always_async):
        if name == "batch_isend_irecv":
            ops = get(args, kwargs, "p2p_op_list") or []
            group = getattr(ops[0], "group", None) if ops else None
        else:
            group = get(args, kwargs, "group")
        groups = self.groups
        if not groups.is_member(group):
            return None
        gid = groups.group_id(group)
        seq = groups.next_seq(gid)
        fields = {"group": gid, "seq": seq, "op": name}
        if tensor_arg is not None:
            dtype, numel = _describe_tensor(get(args, kwargs, tensor_arg))
            if dtype is not None:
                fields["dtype"] = dtype
            if numel is not None:
                fields["numel"] = numel
        fields["src"] = "user"
        at, via = program_call_site(skip=3)  # _begin, the wrapper, then its caller
        if at is not None:
            fields["at"] = at
            if via is not None:
                fields["via"] = via
        if name == "broadcast_object_list" and list_display_argument(3, name, 0, "object_list"):
            # NOTE [An object list nobody keeps] (docs/audit.md): a list display is filled in
            # place on the receiving ranks, then thrown away with the call's arguments.
            fields["discarded"] = True
        if peer_arg is not None:
            peer = get(args, kwargs, peer_arg)
            fields["peer"] = int(peer) if peer is not None else None
        if root_arg is not None:
            root = get(args, kwargs, root_arg, 0)
            if root is not None:
                fields["root"] = int(root)
        if name == "all_reduce":
            self.averaging.note_reduced(get(args, kwargs, tensor_arg))
        if name in ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor",
                    "_reduce_scatter_base", "all_reduce_coalesced"):
            op = get(args, kwargs, "op")
            fields["reduce"] = _reduce_op_name(op, self.c10d)
        is_async = always_async or bool(get(args, kwargs, "async_op", False))
        if is_async:
            fields["async"] = True
        self.recorder.emit(trace_events.COLL, **fields)
        return gid, seq, is_async

    def _wrap_suppressing(self, name, fn, after=None, before=None):
        """init_process_group / new_group / destroy_process_group: nothing inside them is
        recorded; ``before`` sees the arguments, ``after`` the result."""
        recorder = self.recorder
        inside = recorder.suppressed()

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if before is not None and recorder.writer is not None and not recorder.failed:
                try:
                    before(args, kwargs)
                except Exception as e:
                    recorder.fail(e, name)
            with inside:
                result = fn(*args, **kwargs)
            if after is not None and recorder.writer is not None and not recorder.failed:
                try:
                    after(args, kwargs, result)
                except Exception as e:
                    recorder.fail(e, name)
            return result

        wrapper.__ddph_original__ = fn
        return wrapper

    def _after_init(self, args, kwargs, result):
        dist = self.dist
        if dist.is_initialized():
            self.recorder.on_process_group_ready(dist.get_rank(), dist.get_world_size())
            self.recorder.emit(trace_events.PROCESS_GROUP, backend=str(dist.get_backend()),
                               rank=dist.get_rank(), world_size=dist.get_world_size())

    def _before_new_group(self, args, kwargs):
        """``group_call``, before the call: new_group is a call of the whole world (every rank, the
        same ranks, the same order), and a rank may never return from one the others did not make
        alike (NOTE [new_group is the world's call], docs/audit.md). Not with torch 2.x's
        ``use_local_synchronization=True``, which only the group's members call."""
        if not self.recorder.is_active() or kwargs.get("use_local_synchronization"):
            return
        ranks = kwargs.get("ranks", args[0] if args else None)
        if ranks is None:
            ranks = list(range(self.dist.get_world_size()))
        fields = {"ranks": sorted(int(r) for r in ranks)}
        at, _via = program_call_site(skip=3)  # this, the wrapper, then its caller
        if at is not None:
            fields["at"] = at
        self.recorder.emit(trace_events.GROUP_CALL, **fields)

    def _after_new_group(self, args, kwargs, result):
        ranks = kwargs.get("ranks", args[0] if args else None)
        if ranks is None:
            ranks = list(range(self.dist.get_world_size()))
        else:
            ranks = sorted(int(r) for r in ranks)
        member = result is not None and self.groups.is_member(result)
        self.groups.declare(result if member else None, ranks)

    def _before_destroy(self, args, kwargs):
        """``destroy``: which group goes, and the DDP modules still alive then (NOTE [DDP alive at
        destroy_process_group] in docs/audit.md: with torch 1.13 such a module may hang the exit).
        Written before the call: destroying closes the group's connections, its peers may fail
        at once, and the launcher may stop this rank before the call returns."""
        if not self.recorder.is_active():
            return
        group = kwargs.get("group", args[0] if args else None)
        self.recorder.emit(trace_events.DESTROY, group=self.groups.known_id(group),
                           ddp_alive=self.ddp.live_ids())
