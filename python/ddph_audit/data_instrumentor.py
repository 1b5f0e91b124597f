"""torch.utils.data: samplers, DataLoaders, their passes and batches (``DataInstrumentor``).

- ``DistributedSampler.__init__`` -> ``sampler`` line; ``DistributedSampler.set_epoch`` (class
  level) -> ``set_epoch`` line.
- ``DataLoader.__init__`` -> ``sampler`` line for the sampler it draws from (once per sampler
  object); a sampler class of the program that defines ``set_epoch`` gets it wrapped (class level,
  once) so its calls are recorded too. Only the outermost ``set_epoch`` of nested calls is recorded
  (``recorder.suppressed(recorder.SET_EPOCH)``).
- ``DataLoader.__iter__`` -> ``loader`` line the first time, then an ``epoch`` line for each pass
  (``persistent_workers``: the reused iterator's ``_reset`` is a new pass too).
- ``_BaseDataLoaderIter._next_index`` pushes each batch's indices onto a FIFO (worker prefetch
  dispatches in order and delivers in the same order); ``__next__`` pops it and writes ``batch``
  (``idx`` only for "recorded" orders or a custom batch sampler), and ``epoch_end`` on
  StopIteration. Nothing is done per sample for torch-distributed/sequential orders.
"""

import collections
import functools
import importlib
import operator
import types

from . import call_site
from . import trace_events
from . import index_codec
from . import batch_fingerprint
from . import dataset_fingerprint
from .rng_states import global_rng_states, moved_generators
from .instrumentor import Instrumentor
from .object_registry import ObjectRegistry
from .trace_writer import FLAG, INT, JSON_BOOL, line_format
from .worker_watch import WorkerWatch

_SAMPLER_ATTRS = ("num_replicas", "rank", "seed", "shuffle", "drop_last", "replacement")


class _SamplerInfo:
    __slots__ = ("id", "order")

    def __init__(self, sid, order):
        self.id = sid
        self.order = order


def _keeping_dataset_epoch(fn):
    """``fn`` (a dataset's ``set_epoch``) that keeps the epoch it was given on the instance."""

    @functools.wraps(fn)
    def set_epoch(self, *args, **kwargs):
        result = fn(self, *args, **kwargs)
        epoch = args[0] if args else kwargs.get("epoch")
        try:
            self.__dict__["_ddph_dataset_epoch"] = operator.index(epoch)
        except (TypeError, AttributeError):  # no number, or an instance without a __dict__
            pass
        return result

    set_epoch.__ddph_original__ = fn
    return set_epoch


class _LoaderInfo:
    __slots__ = ("id", "sampler", "sampler_id", "needs_idx", "passes", "announced", "mapstyle",
                 "batching", "built_at")

    def __init__(self):
        self.id = None
        self.built_at = None  # the program's line that made the DataLoader
        self.sampler = None
        self.sampler_id = None
        self.needs_idx = True
        self.passes = 0
        self.announced = False
        self.mapstyle = True
        self.batching = "torch"


class _Pass:
    __slots__ = ("loader", "iter", "seq", "needs_idx", "ended", "batch_line", "sampler", "epoch",
                 "drawn", "stream", "rng_seen", "workers_watched")

    def __init__(self, loader_id, k, needs_idx):
        self.loader = loader_id
        self.iter = k
        self.seq = 0
        self.needs_idx = needs_idx
        self.ended = False
        # The sampler's epoch at iter(loader), and whether its order was drawn then (worker
        # prefetch) or is still to be drawn at the first next() (single-process): `draw` line.
        self.sampler = None
        self.epoch = None
        self.drawn = True
        # An iterable dataset: no index names a batch, its content fingerprint does ("fp").
        self.stream = False
        # Whether the first draw of a recorded order was watched for the global generators.
        self.rng_seen = False
        # A stream's forked workers report what they drew (worker_watch.py): the pass's number there.
        self.workers_watched = None
        # A batch whose indices are not recorded (the sampler's order is known): one format.
        self.batch_line = line_format(trace_events.BATCH, {
            "loader": loader_id, "iter": k, "seq": INT, "size": INT, "grad": FLAG})


def _qualname(cls):
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _sized_len(obj):
    if obj is None:
        return None
    try:
        return int(len(obj))
    except Exception:
        return None


def _sampler_fields(sampler):
    out = {}
    for attr in _SAMPLER_ATTRS:
        v = getattr(sampler, attr, None)
        if isinstance(v, bool) or isinstance(v, int):
            out[attr] = v
    return out


def _takes_epoch(sampler):
    """A sampler class of the program's own (not torch's) that defines ``set_epoch``."""
    cls = type(sampler)
    return (callable(getattr(cls, "set_epoch", None)) and
            not cls.__module__.startswith("torch.") and
            not any(c.__module__.startswith("torch.") and "set_epoch" in c.__dict__
                    for c in cls.__mro__))


def _loader_sampler(loader, batch_sampler_iter):
    """(sampler the loader draws from, batching)."""
    bs = getattr(loader, "batch_sampler", None)
    if bs is None:
        return loader.sampler, "torch"
    inner = getattr(bs, "sampler", None)
    if type(bs).__iter__ is batch_sampler_iter and inner is loader.sampler:
        return loader.sampler, "torch"
    if inner is not None and hasattr(inner, "__iter__"):
        return inner, "custom"
    return bs, "custom"


def _on_first_draw(recorder, p):
    """The sampler's order was drawn now, at the pass's first next(): a ``draw`` line when its
    epoch is no longer the one recorded at iter() (set_epoch called in between)."""
    p.drawn = True
    epoch = getattr(p.sampler, "epoch", None)
    if isinstance(epoch, int) and epoch != p.epoch and recorder.active:
        try:
            recorder.emit(trace_events.DRAW, loader=p.loader, iter=p.iter, sampler_epoch=epoch)
        except Exception as e:
            recorder.fail(e, "DataLoader iterator")


def _wrap_next_index(recorder, fn):
    @functools.wraps(fn)
    def _next_index(self):
        p = self.__dict__.get("_ddph_pass")
        # NOTE [An order drawn from the global generators] (docs/audit.md): a recorded order's first
        # draw of the pass, watched: the generators it advanced say where its randomness comes from.
        watch = p is not None and p.needs_idx and not p.stream and not p.rng_seen and recorder.active
        before = global_rng_states() if watch else None
        index = fn(self)
        if watch:
            p.rng_seen = True
            try:
                moved = moved_generators(before, global_rng_states())
                if moved:
                    recorder.emit(trace_events.GLOBAL_DRAW, loader=p.loader, iter=p.iter,
                                  generators=moved)
            except Exception as e:
                recorder.fail(e, "DataLoader iterator")
        if p is not None and not p.drawn:
            _on_first_draw(recorder, p)
        fifo = self.__dict__.get("_ddph_fifo")
        if fifo is None:
            fifo = self._ddph_fifo = collections.deque()
        fifo.append(index)
        return index

    return _next_index


def _wrap_reset(fn):
    @functools.wraps(fn)
    def _reset(self, *args, **kwargs):
        fifo = self.__dict__.get("_ddph_fifo")
        if fifo is not None:
            fifo.clear()
        return fn(self, *args, **kwargs)

    return _reset


_NO_INDEX = object()


def _emit_batch(recorder, p, index, data):
    import torch
    grad = torch.is_grad_enabled()
    if index is _NO_INDEX:
        size = None
    elif isinstance(index, (list, tuple, range)) or getattr(index, "ndim", 0) >= 1:
        size = len(index)
    else:
        size = 1
        index = [index]
    if size is not None and not p.needs_idx and not p.stream:
        recorder.emit_line(p.batch_line, (p.seq, size, JSON_BOOL[grad]))
        return
    fields = {"loader": p.loader, "iter": p.iter, "seq": p.seq}
    if size is not None:
        fields["size"] = size
    fields["grad"] = bool(grad)
    if p.stream:
        fields["fp"] = batch_fingerprint.fingerprint(data)
        rows = batch_fingerprint.sample_fingerprints(data)
        if rows and len(rows) > 1:
            fields["rows"] = rows
    if size is not None:  # and p.needs_idx
        try:
            fields["idx"] = index_codec.encode(index_codec.to_int_list(index))
        except (TypeError, ValueError):
            fields["idx_opaque"] = True  # the sampler yields keys that are not integers
    recorder.emit(trace_events.BATCH, **fields)


def _emit_worker_draws(recorder, watch, p):
    """NOTE [A stream whose workers are reseeded alike] (docs/audit.md): what the pass's workers
    drew, once every batch of theirs has arrived."""
    moved, states = watch.collect(p.workers_watched)
    if moved:
        recorder.emit(trace_events.GLOBAL_DRAW, loader=p.loader, iter=p.iter, generators=moved,
                      worker_rng=states)


def _wrap_next(recorder, watch, fn):
    @functools.wraps(fn)
    def __next__(self):
        try:
            data = fn(self)
        except StopIteration:
            p = self.__dict__.get("_ddph_pass")
            if p is not None and not p.ended and recorder.active:
                try:
                    p.ended = True
                    if p.workers_watched is not None:
                        _emit_worker_draws(recorder, watch, p)
                    recorder.emit(trace_events.EPOCH_END, loader=p.loader, iter=p.iter,
                                  batches=p.seq)
                except Exception as e:
                    recorder.fail(e, "DataLoader iterator")
            raise
        except BaseException:
            fifo = self.__dict__.get("_ddph_fifo")
            if fifo:
                fifo.popleft()  # the failed batch
            raise
        fifo = self.__dict__.get("_ddph_fifo")
        index = fifo.popleft() if fifo else _NO_INDEX
        p = self.__dict__.get("_ddph_pass")
        if p is not None and recorder.active:
            try:
                _emit_batch(recorder, p, index, data)
                p.seq += 1
            except Exception as e:
                recorder.fail(e, "DataLoader iterator")
        return data

    return __next__


class DataInstrumentor(Instrumentor):
    """Samplers, DataLoaders and their iterators (module docstring). The samplers and loaders it
    saw are kept by object (``ObjectRegistry``); a program's sampler classes are wrapped as
    loaders meet them and put back by ``uninstrument()``."""

    NAME = "the torch.utils.data instrumentor"
    MODULE = "torch.utils.data"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def __init__(self, session):
        super().__init__(session)
        self.recorder = session.recorder
        self.ddp = session.ddp  # the epoch lines' parameter hashes
        self.samplers = ObjectRegistry()  # sampler -> _SamplerInfo
        self.loaders = ObjectRegistry()  # loader -> _LoaderInfo
        self._wrapped_classes = set()
        self._torch_iters = {}  # "torch-distributed"/"sequential" -> the __iter__ function
        self._batch_sampler_iter = None
        self.workers = WorkerWatch()  # what iterable datasets' DataLoader workers drew
        self._map = 0  # torch.utils.data.dataloader._DatasetKind.Map

    def _instrument(self):
        dl = importlib.import_module("torch.utils.data.dataloader")
        sampler_mod = importlib.import_module("torch.utils.data.sampler")
        dist_mod = importlib.import_module("torch.utils.data.distributed")
        DistributedSampler = dist_mod.DistributedSampler
        try:
            self._map = dl._DatasetKind.Map
        except AttributeError:
            pass
        self._torch_iters["torch-distributed"] = DistributedSampler.__dict__["__iter__"]
        self._torch_iters["sequential"] = sampler_mod.SequentialSampler.__dict__["__iter__"]
        self._batch_sampler_iter = sampler_mod.BatchSampler.__dict__["__iter__"]
        self._patch_attr(DistributedSampler, "__init__", self._wrap_sampler_init)
        self._wrapped_classes.add(DistributedSampler)
        self._patch_attr(DistributedSampler, "set_epoch", self._wrap_set_epoch)
        self._patch_attr(dl.DataLoader, "__init__", self._wrap_loader_init)
        self._patch_attr(dl.DataLoader, "__iter__", self._wrap_loader_iter)
        base = dl._BaseDataLoaderIter
        rec = self.recorder
        self._patch_attr(base, "_next_index", functools.partial(_wrap_next_index, rec))
        self._patch_attr(base, "_reset", _wrap_reset)
        self._patch_attr(base, "__next__", functools.partial(_wrap_next, rec, self.workers))

    def _uninstrument(self):
        self._wrapped_classes.clear()
        self.workers.close()

    def _patch_attr(self, cls, name, make):
        fn = cls.__dict__.get(name)
        if fn is None or hasattr(fn, "__ddph_original__"):
            return
        wrapper = make(fn)
        wrapper.__ddph_original__ = fn
        self.patch(cls, name, wrapper)

    def _order(self, sampler):
        it = getattr(type(sampler), "__iter__", None)
        for order, fn in self._torch_iters.items():
            if it is fn:
                return order
        return "recorded"

    def _is_mapstyle(self, loader):
        return getattr(loader, "_dataset_kind", self._map) == self._map

    def _sampler_dataset_len(self, sampler, loader=None):
        for attr in ("dataset", "data_source"):
            n = _sized_len(getattr(sampler, attr, None))
            if n is not None:
                return n
        if loader is not None and self._is_mapstyle(loader):
            return _sized_len(loader.dataset)
        return None

    def register_sampler(self, sampler, loader=None, via=None):
        """Writes the ``sampler`` line (once per object); returns its info. ``via``: the framework
        that built it where the program did not (Lightning's own DistributedSampler)."""
        info = self.samplers.get(sampler)
        if info is not None:
            return info
        info = self.samplers.add(sampler, _SamplerInfo(self.recorder.next_id("sampler"),
                                                       self._order(sampler)))
        fields = {"id": info.id, "class": _qualname(type(sampler))}
        n = self._sampler_dataset_len(sampler, loader)
        if n is not None:
            fields["dataset_len"] = n
        fields.update(_sampler_fields(sampler))
        fields["order"] = info.order
        if _takes_epoch(sampler):
            fields["takes_epoch"] = True
        if via:
            fields["via"] = via
        self.recorder.emit(trace_events.SAMPLER, **fields)
        return info

    def _wrap_sampler_init(self, fn):
        samplers, register, recorder = self.samplers, self.register_sampler, self.recorder

        @functools.wraps(fn)
        def __init__(self, *args, **kwargs):
            fn(self, *args, **kwargs)
            if recorder.active and samplers.get(self) is None:
                try:
                    _, via = call_site.program_call_site()
                    register(self, via=via)
                except Exception as e:
                    recorder.fail(e, "DistributedSampler.__init__")

        return __init__

    def _wrap_set_epoch(self, fn):
        recorder = self.recorder
        inside = recorder.suppressed(recorder.SET_EPOCH)
        register = self.register_sampler

        @functools.wraps(fn)
        def set_epoch(self, *args, **kwargs):
            outermost = not inside.active()
            with inside:
                result = fn(self, *args, **kwargs)
            if outermost and recorder.active:
                try:
                    info = register(self)
                    epoch = args[0] if args else kwargs.get("epoch", next(iter(kwargs.values()), None))
                    try:
                        epoch = operator.index(epoch)
                    except TypeError:
                        epoch = getattr(self, "epoch", None)
                        epoch = epoch if isinstance(epoch, int) else None
                    recorder.emit(trace_events.SET_EPOCH, sampler=info.id, epoch=epoch)
                except Exception as e:
                    recorder.fail(e, "set_epoch")
            return result

        set_epoch.__ddph_original__ = fn
        return set_epoch

    def _wrap_class_set_epoch(self, cls, wrap=None):
        """Wraps ``set_epoch`` on every class of ``cls``'s MRO that defines it (once per class),
        with ``wrap(fn)``: a sampler's (recorded as a ``set_epoch`` line) by default."""
        wrap = wrap or self._wrap_set_epoch
        for klass in cls.__mro__:
            if klass in self._wrapped_classes or klass is object:
                continue
            self._wrapped_classes.add(klass)
            fn = klass.__dict__.get("set_epoch")
            if isinstance(fn, types.FunctionType) and not hasattr(fn, "__ddph_original__"):
                try:
                    self.patch(klass, "set_epoch", wrap(fn))
                except (TypeError, AttributeError):
                    pass

    def _on_loader_init(self, loader):
        info = self.loaders.add(loader, _LoaderInfo())
        info.built_at, _ = call_site.program_call_site()
        info.mapstyle = self._is_mapstyle(loader)
        if not info.mapstyle:
            info.needs_idx = False
            # NOTE [A stream whose set_epoch reaches nothing] (docs/audit.md): an iterable
            # dataset's own set_epoch keeps its epoch, for its passes' ``dataset_epoch``.
            self._wrap_class_set_epoch(type(loader.dataset), _keeping_dataset_epoch)
            return
        sampler, batching = _loader_sampler(loader, self._batch_sampler_iter)
        self._wrap_class_set_epoch(type(sampler))
        sinfo = self.register_sampler(sampler, loader)
        info.sampler = sampler
        info.sampler_id = sinfo.id
        info.batching = batching
        info.needs_idx = sinfo.order == "recorded" or batching == "custom"

    def _wrap_loader_init(self, fn):
        loaders, on_init, recorder = self.loaders, self._on_loader_init, self.recorder

        @functools.wraps(fn)
        def __init__(self, *args, **kwargs):
            fn(self, *args, **kwargs)
            if recorder.active and loaders.get(self) is None:
                try:
                    on_init(self)
                except Exception as e:
                    recorder.fail(e, "DataLoader.__init__")

        return __init__

    def _announce(self, loader, info):
        info.id = self.recorder.next_id("loader")
        info.announced = True
        fields = {"id": info.id, "sampler": info.sampler_id,
                  "dataset": type(loader.dataset).__name__}
        n = _sized_len(loader.dataset) if info.mapstyle else None
        if n is not None:
            fields["dataset_len"] = n
        if info.mapstyle:
            fields.update(dataset_fingerprint.describe(loader.dataset))
        batch_size = loader.batch_size
        if batch_size is None:  # DataLoader(batch_sampler=…): the batch sampler's own, when it says
            batch_size = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
            batch_size = batch_size if isinstance(batch_size, int) and batch_size > 0 else None
        drop_last = loader.drop_last or bool(getattr(loader.batch_sampler, "drop_last", False))
        fields.update({"batch_size": batch_size, "drop_last": bool(drop_last),
                       "num_workers": int(loader.num_workers), "batching": info.batching})
        if not info.mapstyle:
            fields["iterable"] = True
        if info.built_at:
            fields["built_at"] = info.built_at
        if getattr(loader, "persistent_workers", False) and loader.num_workers > 0:
            fields["persistent_workers"] = True
        self.recorder.emit(trace_events.LOADER, **fields)

    def _on_pass_start(self, loader, it):
        info = self.loaders.get(loader)
        if info is None:
            self._on_loader_init(loader)
            info = self.loaders.get(loader)
        if not info.announced:
            self._announce(loader, info)
        k = info.passes
        info.passes += 1
        p = it._ddph_pass = _Pass(info.id, k, info.needs_idx)
        p.stream = not info.mapstyle
        fields = {"loader": info.id, "iter": k}
        sampler = info.sampler
        if sampler is not None:
            epoch = getattr(sampler, "epoch", None)
            if isinstance(epoch, int):
                fields["sampler_epoch"] = epoch
                p.sampler, p.epoch = sampler, epoch
                # Worker processes were handed their first indices inside iter(): drawn already.
                p.drawn = bool(it.__dict__.get("_ddph_fifo"))
            fields.update(_sampler_fields(sampler))
            n = self._sampler_dataset_len(sampler, loader)
            if n is not None:
                fields["dataset_len"] = n
        if info.mapstyle:
            n = _sized_len(loader)
            if n is not None:
                fields["batches"] = n
        else:
            epoch = getattr(loader.dataset, "__dict__", {}).get("_ddph_dataset_epoch")
            if isinstance(epoch, int):
                fields["dataset_epoch"] = epoch
        fields["params"] = self.ddp.live_hashes()
        self.recorder.emit(trace_events.EPOCH, **fields)

    def _watch_workers(self, loader):
        """NOTE [A stream whose workers are reseeded alike]: an iterable dataset's forked workers,
        about to start, get a watched worker_init_fn: (the pass's number there, the program's)."""
        try:
            if self._is_mapstyle(loader) or not self.workers.applies(loader):
                return None
            return self.workers.wrap_init(loader)
        except Exception as e:
            self.recorder.fail(e, "DataLoader.__iter__")
            return None

    def _wrap_loader_iter(self, fn):
        on_pass_start, recorder, watch_workers = self._on_pass_start, self.recorder, self._watch_workers

        @functools.wraps(fn)
        def __iter__(self):
            watched = watch_workers(self) if recorder.active else None
            try:
                it = fn(self)
            finally:
                if watched is not None:
                    WorkerWatch.restore(self, watched[1])
            if recorder.active:
                try:
                    on_pass_start(self, it)
                    if watched is not None:
                        it._ddph_pass.workers_watched = watched[0]
                except Exception as e:
                    recorder.fail(e, "DataLoader.__iter__")
            return it

        return __iter__
