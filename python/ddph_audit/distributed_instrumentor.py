"""torch.distributed: collectives, point-to-point calls, process groups.

Each public function listed in ``COLLECTIVES`` is replaced, in ``torch.distributed`` and in
``torch.distributed.distributed_c10d``, by a wrapper that writes ``coll`` before the call and
``coll_done`` once it returned (for ``async_op=True`` / ``isend`` / ``irecv``: when the call
returned, with ``"async": true``). Only the outermost call is recorded (``all_gather_object`` calls
``all_gather`` inside; ``init_process_group`` and ``new_group`` may call ``barrier``): the wrapped call runs inside
``recorder.suppressed()``. ``seq`` counts this rank's recorded calls per group.
"""

import functools
import inspect
import threading

from . import recorder, trace_events

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

_patched = {}  # name -> (module, original) for uninstrument
_seq_lock = threading.Lock()
_seq = {}  # group id -> next seq
_groups = {}  # id(pg) -> (pg, group id)
_dist = None
_c10d = None


def dtype_name(dtype):
    """``float32`` for ``torch.float32``: how the trace names a dtype."""
    return str(dtype).replace("torch.", "")


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


def group_id(group):
    """"0" for the default group (None / WORLD), the declared id for the others."""
    if group is None:
        return "0"
    c10d = _c10d
    try:
        world = c10d.GroupMember.WORLD if hasattr(c10d, "GroupMember") else None
        if group is world or group is c10d._get_default_group():
            return "0"
    except Exception:
        pass
    entry = _groups.get(id(group))
    if entry is not None and entry[0] is group:
        return entry[1]
    # A group created by a path we did not see: declare it now.
    ranks = _group_ranks(group)
    return _declare_group(group, ranks)


def _group_ranks(group):
    c10d = _c10d
    try:
        fn = getattr(c10d, "get_process_group_ranks", None)
        if fn is not None:
            return [int(r) for r in fn(group)]
    except Exception:
        pass
    try:
        return sorted(int(r) for r in c10d._pg_group_ranks[group].keys())
    except Exception:
        return None


def _declare_group(group, ranks):
    gid = str(recorder.next_id("group") + 1)
    if group is not None:
        _groups[id(group)] = (group, gid)
    recorder.emit(trace_events.GROUP, id=gid, ranks=ranks)
    return gid


def next_seq(gid):
    return next_seqs(gid, 1)


def next_seqs(gid, count):
    """The first of ``count`` consecutive sequence numbers of the group, taken at once."""
    with _seq_lock:
        n = _seq.get(gid, 0)
        _seq[gid] = n + count
        return n


def _not_member(group):
    if group is None:
        return False
    try:
        fn = getattr(_c10d, "_rank_not_in_group", None)
        return bool(fn(group)) if fn is not None else False
    except Exception:
        return False


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


def _wrap_collective(name, fn):
    get = _arg_getter(fn)
    tensor_arg = TENSOR_ARG.get(name)
    peer_arg = PEER_ARG.get(name)
    root_arg = ROOT_ARG.get(name)
    always_async = name in ALWAYS_ASYNC
    inside = recorder.suppressed()

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if inside.active() or not recorder.state.active:
            with inside:
                return fn(*args, **kwargs)
        token = None
        try:
            token = _begin(name, args, kwargs, get, tensor_arg, peer_arg, root_arg, always_async)
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
                    recorder.emit(trace_events.COLL_DONE, group=gid, seq=seq)
            except Exception as e:
                recorder.fail(e, name)
        return result

    wrapper.__ddph_original__ = fn
    return wrapper


def _begin(name, args, kwargs, get, tensor_arg, peer_arg, root_arg, always_async):
    if name == "batch_isend_irecv":
        ops = get(args, kwargs, "p2p_op_list") or []
        group = getattr(ops[0], "group", None) if ops else None
    else:
        group = get(args, kwargs, "group")
    if _not_member(group):
        return None
    gid = group_id(group)
    seq = next_seq(gid)
    fields = {"group": gid, "seq": seq, "op": name}
    if tensor_arg is not None:
        dtype, numel = _describe_tensor(get(args, kwargs, tensor_arg))
        if dtype is not None:
            fields["dtype"] = dtype
        if numel is not None:
            fields["numel"] = numel
    fields["src"] = "user"
    if peer_arg is not None:
        peer = get(args, kwargs, peer_arg)
        fields["peer"] = int(peer) if peer is not None else None
    if root_arg is not None:
        root = get(args, kwargs, root_arg, 0)
        if root is not None:
            fields["root"] = int(root)
    if name in ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor",
                "_reduce_scatter_base", "all_reduce_coalesced"):
        op = get(args, kwargs, "op")
        fields["reduce"] = _reduce_op_name(op)
    is_async = always_async or bool(get(args, kwargs, "async_op", False))
    if is_async:
        fields["async"] = True
    recorder.emit(trace_events.COLL, **fields)
    return gid, seq, is_async


_REDUCE_NAMES = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")


def _reduce_op_name(op):
    if op is None:
        return "SUM"
    ReduceOp = getattr(_c10d, "ReduceOp", None)
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


def _wrap_suppressing(name, fn, after=None, before=None):
    """init_process_group / new_group / destroy_process_group: nothing inside them is recorded;
    ``before`` sees the arguments, ``after`` the result."""
    inside = recorder.suppressed()

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if before is not None and recorder.state.writer is not None and not recorder.state.failed:
            try:
                before(args, kwargs)
            except Exception as e:
                recorder.fail(e, name)
        with inside:
            result = fn(*args, **kwargs)
        if after is not None and recorder.state.writer is not None and not recorder.state.failed:
            try:
                after(args, kwargs, result)
            except Exception as e:
                recorder.fail(e, name)
        return result

    wrapper.__ddph_original__ = fn
    return wrapper


def _after_init(args, kwargs, result):
    if _dist.is_initialized():
        recorder.on_process_group_ready(_dist.get_rank(), _dist.get_world_size())
        recorder.emit(trace_events.PROCESS_GROUP, backend=str(_dist.get_backend()),
                      rank=_dist.get_rank(), world_size=_dist.get_world_size())


def _after_new_group(args, kwargs, result):
    ranks = kwargs.get("ranks", args[0] if args else None)
    if ranks is None:
        ranks = list(range(_dist.get_world_size()))
    else:
        ranks = sorted(int(r) for r in ranks)
    member = result is not None and not _not_member(result)
    _declare_group(result if member else None, ranks)


def _before_destroy(args, kwargs):
    """``destroy``: which group goes, and the DDP modules still alive then (NOTE [DDP alive at
    destroy_process_group] in docs/audit.md: with torch 1.13 such a module may hang the exit).
    Written before the call: destroying closes the group's connections, its peers may fail at
    once, and the launcher may stop this rank before the call returns."""
    if not recorder.is_active():
        return
    group = kwargs.get("group", args[0] if args else None)
    from . import ddp_instrumentor
    alive = sorted(st.id for _, st in ddp_instrumentor.registry.live())
    gid = "0" if group is None else _groups.get(id(group), (None, "0"))[1]
    recorder.emit(trace_events.DESTROY, group=gid, ddp_alive=alive)


def _set_everywhere(name, fn, wrapper):
    for mod in (_dist, _c10d):
        if mod is not None and getattr(mod, name, None) is fn:
            setattr(mod, name, wrapper)
            _patched.setdefault(name, []).append((mod, fn))


def patch(dist_module):
    """Called right after ``torch.distributed`` is imported."""
    global _dist, _c10d
    if not getattr(dist_module, "is_available", lambda: False)():
        return
    _dist = dist_module
    _c10d = getattr(dist_module, "distributed_c10d", None)
    if _c10d is None:
        import importlib
        _c10d = importlib.import_module("torch.distributed.distributed_c10d")
    for name in COLLECTIVES:
        fn = getattr(_c10d, name, None) or getattr(_dist, name, None)
        if fn is None or hasattr(fn, "__ddph_original__"):
            continue
        _set_everywhere(name, fn, _wrap_collective(name, fn))
    for name, after, before in (("init_process_group", _after_init, None),
                                ("new_group", _after_new_group, None),
                                ("destroy_process_group", None, _before_destroy)):
        fn = getattr(_c10d, name, None)
        if fn is None or hasattr(fn, "__ddph_original__"):
            continue
        _set_everywhere(name, fn, _wrap_suppressing(name, fn, after, before))
    # Already initialised (instrument() called late): the rank is known now.
    try:
        _after_init((), {}, None)
    except Exception:
        pass


def unpatch():
    for name, entries in _patched.items():
        for mod, fn in entries:
            setattr(mod, name, fn)
    _patched.clear()
