"""DDP's gradient allreduces seen from autograd, without a comm hook (DDP runs unchanged).

After a forward that makes DDP reduce gradients in the next backward (grad enabled, not under
``no_sync``), a hook on the output's gradient runs when backward reaches the module. It queues an
autograd final callback, *launched*, which runs once backward's compute is over and DDP has
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

import weakref

from . import recorder

LAYOUT_READS = 4  # synchronised backwards whose layout is read again (DDP rebuilds at most once)


def _engine():
    import torch
    return torch.autograd.Variable._execution_engine


def available():
    try:
        return hasattr(_engine(), "queue_callback")
    except Exception:
        return False


def will_sync(ddp):
    """Evaluated before DDP's forward: whether the next backward reduces gradients."""
    import torch
    return torch.is_grad_enabled() and bool(getattr(ddp, "require_backward_grad_sync", True))


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
    """What DDP's buckets hold: [(dtype name, numel)], and how often it was read."""

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
        from .distributed_instrumentor import dtype_name
        buffers = [b.buffer() for b in ddp.reducer._get_zeros_like_grad_buckets()]
        return [(dtype_name(t.dtype), int(t.numel())) for t in buffers]

    def _read_logged(self, ddp):
        data = ddp._get_ddp_logging_data()
        text = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
        sizes = [int(s) for s in str(text).replace(",", " ").split()]
        if self.dtype is None:  # several dtypes: which bucket holds which is not logged
            return [("mixed", n) for n in sizes]
        from .distributed_instrumentor import dtype_name
        return [(dtype_name(self.dtype), n // self.itemsize) for n in sizes]


def _itemsize(dtype):
    import torch
    return torch.empty((), dtype=dtype).element_size()


class _Backward:
    """One forward's watch: fires at most once, in the backward through its output."""

    __slots__ = ("ddp", "st", "op_dtype", "tokens")

    def __init__(self, ddp, st, op_dtype):
        # Weak (and the group by its id, in st.gid): the output's graph keeps this watch, and must
        # keep neither the module nor its process group alive.
        self.ddp = weakref.ref(ddp)
        self.st = st
        self.op_dtype = op_dtype
        self.tokens = None

    def on_output_grad(self, grad):
        st = self.st
        if st.watch is not self:  # a later forward's watch, or this one fired already
            return None
        st.watch = None
        try:
            _engine().queue_callback(self.launched)
        except Exception as e:
            recorder.fail(e, "DDP backward (output hook)")
        return None

    def launched(self):
        from . import distributed_instrumentor as di
        st = self.st
        gid = st.gid
        try:
            ddp = self.ddp()
            if ddp is None or not recorder.is_active():
                return
            buckets = st.layout.current(ddp)
            events = []
            tokens = []
            for index, (dtype, numel) in enumerate(buckets):
                seq = di.next_seq(gid)
                events.append(("coll", {"group": gid, "seq": seq, "op": "all_reduce",
                                        "dtype": self.op_dtype or dtype, "numel": numel,
                                        "src": "ddp", "ddp": st.id, "bucket": index,
                                        "backward": st.backwards}))
                tokens.append(seq)
            st.backwards += 1
            self.tokens = (gid, tokens)
            recorder.emit_many(events)
            _engine().queue_callback(self.completed)
        except Exception as e:
            recorder.fail(e, "DDP backward (buckets launched)")

    def completed(self):
        try:
            if self.tokens is None:
                return
            gid, seqs = self.tokens
            recorder.emit_many([("coll_done", {"group": gid, "seq": s}) for s in seqs])
        except Exception as e:
            recorder.fail(e, "DDP backward (buckets completed)")


def watch(ddp, st, output, op_dtype=None):
    """After DDP's forward: arms the watch of the next backward through ``output``.

    ``op_dtype``: the dtype the buckets travel in when a builtin hook changes it (FP16_COMPRESS)."""
    tensors = _grad_tensors(output, [])
    if not tensors:
        return
    if st.layout is None:  # the module's first watched forward
        from . import distributed_instrumentor as di
        st.layout = Layout(ddp.module)
        st.gid = di.group_id(getattr(ddp, "process_group", None))
    w = _Backward(ddp, st, op_dtype)
    st.watch = w
    for t in tensors:
        t.register_hook(w.on_output_grad)
