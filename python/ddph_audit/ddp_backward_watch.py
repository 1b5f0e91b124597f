"""DDP's gradient allreduces seen from autograd, without a comm hook (DDP runs unchanged).

After a forward that makes DDP reduce gradients in the next backward (grad enabled, not under
``no_sync``), the module's watch is armed; a gradient hook fires it when backward reaches the
module: a hook on one parameter, registered once, when DDP reduces every parameter in every
backward (a tensor hook runs before the parameter's gradient is accumulated, so before DDP's own
hook on it), else hooks on each armed forward's output. It queues an autograd final callback, *launched*, which runs once backward's compute is over and DDP has
launched every bucket, but before DDP's own finalize (queued later, when the last bucket became
ready): it writes one ``coll`` line per bucket (all in one write) and queues *completed*, which runs
after DDP's finalize has waited for every bucket and writes their ``coll_done`` lines. A rank that
hangs or fails in the gradient allreduce therefore has the buckets' ``coll`` lines and no
``coll_done``; ``coll`` to ``coll_done`` is the time the rank waited for communication after its
compute. NOTE [Buckets from autograd callbacks] in docs/audit.md, "The recorder".

The bucket layout (dtype and numel per bucket) is the reducer's own for modules on the CPU (read
through ``_get_zeros_like_grad_buckets`` in the first synchronised backwards, when DDP may rebuild
its buckets, then kept); for other devices it is DDP's logged layout (``bucket_sizes``, bytes),
which never allocates on the device but trails DDP's one rebuild by a backward (see docs/audit.md).
"""

import functools
import weakref

from . import trace_events
from .groups import dtype_name
from .trace_writer import INT, line_format

LAYOUT_READS = 4  # synchronised backwards whose layout is read again (DDP rebuilds at most once)


def autograd_engine():
    """torch's autograd engine (its ``queue_callback``), or None where it has none."""
    try:
        import torch
        engine = torch.autograd.Variable._execution_engine
        return engine if hasattr(engine, "queue_callback") else None
    except Exception:
        return None


def _grad_tensors(out, found, depth=0):
    import torch
    if isinstance(out, torch.Tensor):
        if out.requires_grad:
            found.append(out)
    elif depth < 4:
        if isinstance(out, (list, tuple)):
            for o in out:
                _grad_tensors(o, found, depth + 1)
        elif isinstance(out, dict):
            for o in out.values():
                _grad_tensors(o, found, depth + 1)
    return found


class Layout:
    """What DDP's buckets hold: ((dtype name, numel), ...), and how often it was read."""

    __slots__ = ("buckets", "reads", "on_cpu", "dtype", "itemsize")

    def __init__(self, module):
        params = [p for p in module.parameters() if p.requires_grad]
        self.on_cpu = all(p.device.type == "cpu" for p in params)
        dtypes = {p.dtype for p in params}
        self.dtype = dtypes.pop() if len(dtypes) == 1 else None
        self.itemsize = _itemsize(self.dtype) if self.dtype is not None else 1
        self.buckets = None
        self.reads = 0

    def current(self, ddp):
        if self.buckets is None or self.reads < LAYOUT_READS:
            self.buckets = self._read_reducer(ddp) if self.on_cpu else self._read_logged(ddp)
            self.reads += 1
        return self.buckets

    @staticmethod
    def _read_reducer(ddp):
        buffers = [b.buffer() for b in ddp.reducer._get_zeros_like_grad_buckets()]
        return tuple((dtype_name(t.dtype), int(t.numel())) for t in buffers)

    def _read_logged(self, ddp):
        data = ddp._get_ddp_logging_data()
        text = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
        sizes = [int(s) for s in str(text).replace(",", " ").split()]
        if self.dtype is None:  # several dtypes: which bucket holds which is not logged
            return tuple(("mixed", n) for n in sizes)
        name = dtype_name(self.dtype)
        return tuple((name, n // self.itemsize) for n in sizes)


def _itemsize(dtype):
    import torch
    return torch.empty((), dtype=dtype).element_size()


class Watch:
    """One DDP module's watch: armed by a synchronising forward, fired once in the backward."""

    __slots__ = ("ddp", "st", "gid", "groups", "recorder", "engine", "layout", "armed", "op_dtype",
                 "handle", "formats", "formats_of", "done")

    def __init__(self, ddp, st, groups, engine):
        # Weak (and the group by its id): a parameter's or an output's hook keeps this watch, and
        # must keep neither the module nor its process group alive.
        self.ddp = weakref.ref(ddp)
        self.st = st
        self.groups = groups  # groups.ProcessGroups: the buckets' sequence numbers
        self.recorder = groups.recorder  # the lines go where the group lines go
        self.engine = engine  # autograd_engine()
        self.gid = groups.group_id(getattr(ddp, "process_group", None))
        self.layout = Layout(ddp.module)
        self.armed = False  # True (parameter hook), or the armed forward's ticket (output hooks)
        self.op_dtype = None
        self.handle = None  # the parameter hook's handle
        self.formats = None  # the buckets' coll line formats, made for formats_of
        self.formats_of = None
        self.done = line_format(trace_events.COLL_DONE, {"group": self.gid, "seq": INT})
        param = _always_reduced_parameter(ddp)
        if param is not None:
            self.handle = param.register_hook(self.on_param_grad)

    def arm(self, output, op_dtype):
        self.op_dtype = op_dtype
        if self.handle is not None:
            self.armed = True
            return
        tensors = _grad_tensors(output, [])
        if tensors:
            ticket = object()  # only the last armed forward's output fires
            self.armed = ticket
            hook = functools.partial(self.on_output_grad, ticket)
            for t in tensors:
                t.register_hook(hook)

    def on_param_grad(self, grad):
        if self.armed:
            self._fire()
        return None

    def on_output_grad(self, ticket, grad):
        if self.armed is ticket:
            self._fire()
        return None

    def _fire(self):
        self.armed = False
        try:
            self.engine.queue_callback(self.launched)
        except Exception as e:
            self.recorder.fail(e, "DDP backward (gradient hook)")

    def launched(self):
        st = self.st
        try:
            ddp = self.ddp()
            if ddp is None or not self.recorder.is_active():
                return
            formats = self._bucket_formats(self.layout.current(ddp))
            first = self.groups.next_seqs(self.gid, len(formats))
            backward = st.backwards
            st.backwards = backward + 1
            self.recorder.emit_lines([(f, (first + i, backward)) for i, f in enumerate(formats)])
            self.engine.queue_callback(functools.partial(self.completed, first, len(formats)))
        except Exception as e:
            self.recorder.fail(e, "DDP backward (buckets launched)")

    def completed(self, first, n):
        try:
            self.recorder.emit_lines([(self.done, (seq,)) for seq in range(first, first + n)])
        except Exception as e:
            self.recorder.fail(e, "DDP backward (buckets completed)")

    def _bucket_formats(self, buckets):
        key = (buckets, self.op_dtype)
        if self.formats_of != key:
            st = self.st
            self.formats = [line_format(trace_events.COLL, {
                "group": self.gid, "seq": INT, "op": "all_reduce", "dtype": self.op_dtype or dtype,
                "numel": numel, "src": "ddp", "ddp": st.id, "bucket": index, "backward": INT})
                for index, (dtype, numel) in enumerate(buckets)]
            self.formats_of = key
        return self.formats

    def close(self):
        """Removes the parameter hook (the module is gone, or recording stops)."""
        handle, self.handle = self.handle, None
        self.armed = False
        if handle is not None:
            handle.remove()


def _always_reduced_parameter(ddp):
    """A parameter DDP reduces in every synchronised backward: any of them, unless DDP allows
    some to go unused (``find_unused_parameters``, ``static_graph``); None then."""
    if getattr(ddp, "find_unused_parameters", True) or getattr(ddp, "static_graph", False):
        return None
    ignored = set(getattr(ddp, "parameters_to_ignore", None) or ())
    for name, p in ddp.module.named_parameters():
        if p.requires_grad and name not in ignored and not getattr(p, "_ddp_ignored", False):
            return p
    return None


def watch(ddp, st, output, op_dtype, groups, engine):
    """After DDP's forward: arms the module's watch for the next backward that reaches it.

    ``op_dtype``: the dtype the buckets travel in when a builtin hook changes it (FP16_COMPRESS).
    (A module function, called through the module: benchmarks/audit_step_cost.py switches it.)"""
    if st.watch is None:  # the module's first watched forward
        st.watch = Watch(ddp, st, groups, engine)
    st.watch.arm(output, op_dtype)
