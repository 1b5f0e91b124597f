"""The CUDA face of torch served by the CPU: a GPU DDP program runs unmodified on CPU ranks.

``ddp-sim launch --cpu`` (and ``python3 -m ddph_audit --cpu``) set ``DDPH_CPU=1``; every Python
process of the run then instruments torch when it imports it (``_sitecustomize``). What is served,
and how, is in docs/cpu-emulation.md; in short:

- backends: ``nccl`` (alone or in ``"cuda:nccl,cpu:gloo"``-style strings, in
  ``init_process_group`` and ``new_group``) runs on ``gloo``; ``barrier(device_ids=...)`` too;
- devices: ``torch.cuda`` answers as ``DDPH_CPU_GPUS`` devices (default: the ranks per node,
  ``LOCAL_WORLD_SIZE``) with a current device per process; streams, events, memory counters,
  seeds and RNG states are stand-ins; ``torch.accelerator`` likewise where torch has it;
- placement: every ``cuda`` device argument (a string, an int, a ``torch.device``) of tensor and
  module moves, factories, ``torch.load``'s ``map_location`` and ``DDP(device_ids=...,
  output_device=...)`` becomes the CPU; a moved tensor is the tensor itself (no copy);
- mixed precision: ``autocast("cuda")`` computes in float32 unless ``DDPH_CPU_AUTOCAST=bf16``
  (then CPU autocast in bfloat16); ``GradScaler`` is a pass-through (scale 1.0, every step taken);
- ``nn.SyncBatchNorm`` synchronizes its statistics over the CPU ranks (sync_batchnorm_on_cpu.py).

Arguments that name no CUDA device pass through untouched: a CPU program runs exactly as without
the emulation. The first time the program asks for something emulated, one ``emulation`` event
records what it asked for (docs/trace-format.md).
"""

import contextlib
import functools
import inspect
import os
import time

from ddph_audit import environment, trace_events
from ddph_audit.instrumentor import Instrumentor

from . import sync_batchnorm_on_cpu

# torch functions that take a ``device=`` keyword (factories); absent names are skipped.
FACTORIES = (
    "tensor", "as_tensor", "asarray", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
    "randperm", "arange", "range", "linspace", "logspace", "eye", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "empty_strided",
    "tril_indices", "triu_indices", "sparse_coo_tensor", "scalar_tensor", "normal",
    "bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window",
)
TENSOR_FACTORIES = ("new_tensor", "new_zeros", "new_ones", "new_empty", "new_full")


_device_type = None  # torch.device, once torch is imported (is_cuda_device's fast path)


def is_cuda_device(d):
    """True for what names a CUDA device: "cuda", "cuda:1", an int ordinal, torch.device("cuda").
    On every tensor and module ``.to()``: exact types first, no attribute lookups that fail."""
    cls = type(d)
    if cls is str:
        return d.startswith("cuda")
    if cls is int:
        return True
    if cls is _device_type:
        return d.type == "cuda"
    if isinstance(d, str):
        return d.startswith("cuda")
    if isinstance(d, int):
        return not isinstance(d, bool)
    return _device_type is None and getattr(d, "type", None) == "cuda"


def device_index(d, current):
    """The ordinal a CUDA device argument names (``current`` for "cuda" and None)."""
    if d is None:
        return current
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    if isinstance(d, str):
        head, _, tail = d.partition(":")
        return int(tail) if tail else current
    index = getattr(d, "index", None)
    return current if index is None else index


def cpu_backend(backend):
    """"gloo" for a backend naming nccl ("nccl", "cuda:nccl,cpu:gloo", Backend.NCCL) or None;
    any other backend unchanged."""
    if backend is None:
        return "gloo"
    text = str(backend).lower()
    if "nccl" in text:
        return "gloo"
    return backend


class DeviceProperties:
    """What ``get_device_properties`` answers for a stand-in device."""

    def __init__(self, index, total_memory):
        self.name = "CPU stand-in for cuda:%d (ddp-sim --cpu)" % index
        self.major, self.minor = 8, 0
        self.total_memory = total_memory
        self.multi_processor_count = os.cpu_count() or 1
        self.is_integrated = False
        self.is_multi_gpu_board = False

    def __repr__(self):
        return "_CudaDeviceProperties(name='%s', major=%d, minor=%d, total_memory=%dMB, " \
               "multi_processor_count=%d)" % (self.name, self.major, self.minor,
                                              self.total_memory >> 20, self.multi_processor_count)


class Event:
    """A stand-in ``torch.cuda.Event``: records the host clock; ``elapsed_time`` in ms."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self._t = None

    def record(self, stream=None):
        self._t = time.perf_counter()

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end_event):
        if self._t is None or end_event._t is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._t - self._t) * 1000.0


class Stream:
    """A stand-in ``torch.cuda.Stream``: work runs at once on the CPU, so it is always done."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = device
        self.priority = priority

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self):
        return True

    def synchronize(self):
        pass

    def __eq__(self, other):
        return isinstance(other, Stream)

    def __hash__(self):
        return 0


class CudaOnCpuInstrumentor(Instrumentor):
    """Serves ``torch.cuda`` (and NCCL) from the CPU in this process; see the module docstring."""

    NAME = "the CPU emulation of CUDA (--cpu)"

    def __init__(self, session=None, gpus=None, autocast=None):
        super().__init__(session)
        self.gpus = gpus if gpus is not None else self._gpus_from_environment()
        self.autocast = (autocast if autocast is not None
                         else os.environ.get(environment.CPU_AUTOCAST, "off")).lower()
        self.current = 0
        self.asked_backend = None  # what the program passed to init_process_group
        self.asked_devices = set()  # the ordinals it placed work on or selected
        self.recorded = False  # the emulation event was written
        self.joined = False  # init_process_group returned: the event can say the backend
        self._rng_states = {}
        self._torch = None

    @staticmethod
    def _gpus_from_environment():
        for name in (environment.CPU_GPUS, "LOCAL_WORLD_SIZE"):
            try:
                n = int(os.environ.get(name, ""))
            except ValueError:
                continue
            if n > 0:
                return n
        return 1

    # -- what the program asked for -------------------------------------------------------

    def note_device(self, d):
        self.asked_devices.add(device_index(d, self.current))
        if not self.recorded:
            self.record()

    def record(self):
        """Writes the one ``emulation`` event once ``init_process_group`` has returned (the event
        waits in memory until the rank's file opens). A process that is not recording by then
        never will: it is marked recorded, so that placements stop asking."""
        if self.recorded or not self.joined:
            return
        self.recorded = True
        recorder = self.session.recorder if self.session is not None else None
        if recorder is not None and recorder.is_active():
            recorder.emit(trace_events.EMULATION, asked_backend=self.asked_backend, backend="gloo",
                          gpus=self.gpus, device="cuda:%d" % self.current,
                          devices=sorted(self.asked_devices), autocast=self.autocast)

    # -- instrument -------------------------------------------------------------------------

    def _instrument(self):
        global _device_type
        import torch
        self._torch = torch
        _device_type = torch.device
        self._devices(torch)
        self._placement(torch)
        self._precision(torch)
        self._distributed(torch)
        self._sync_batchnorm(torch)
        self._accelerator(torch)

    def _uninstrument(self):
        self._torch = None

    def _check_index(self, d):
        index = device_index(d, self.current)
        if not 0 <= index < self.gpus:
            raise RuntimeError("CUDA error: invalid device ordinal (device %d of the %d stand-in "
                               "devices of ddp-sim --cpu; --gpus N sets how many)"
                               % (index, self.gpus))
        return index

    def _devices(self, torch):
        cuda = torch.cuda
        me = self

        def set_device(device):
            me.current = me._check_index(device)
            me.note_device(me.current)

        class device:  # torch.cuda.device(i): a context that selects a device
            def __init__(self, device):
                self.idx = -1 if device is None else device_index(device, me.current)
                self.prev_idx = me.current

            def __enter__(self):
                self.prev_idx = me.current
                if self.idx >= 0:
                    me.current = me._check_index(self.idx)

            def __exit__(self, *exc):
                me.current = self.prev_idx
                return False

        class device_of(device):
            def __init__(self, obj):
                super().__init__(-1)

        total = self._memory_per_device()
        simple = {
            "is_available": lambda: True,
            "is_initialized": lambda: True,
            "init": lambda: None,
            "_lazy_init": lambda: None,
            "device_count": lambda: me.gpus,
            "current_device": lambda: me.current,
            "set_device": set_device,
            "get_device_name": lambda device=None: DeviceProperties(me._check_index(device), total).name,
            "get_device_properties": lambda device=None: DeviceProperties(me._check_index(device), total),
            "get_device_capability": lambda device=None: (8, 0),
            "get_arch_list": lambda: [],
            "is_bf16_supported": lambda: True,
            "can_device_access_peer": lambda device, peer: True,
            "synchronize": lambda device=None: None,
            "ipc_collect": lambda: None,
            "empty_cache": lambda: None,
            "set_per_process_memory_fraction": lambda fraction, device=None: None,
            "mem_get_info": lambda device=None: (total, total),
            "memory_stats": lambda device=None: {},
            "memory_summary": lambda device=None, abbreviated=False: "",
            "manual_seed": lambda seed: None,
            "manual_seed_all": lambda seed: None,
            "seed": lambda: None,
            "seed_all": lambda: None,
            "initial_seed": lambda: torch.initial_seed(),
            "get_rng_state": self._get_rng_state,
            "set_rng_state": self._set_rng_state,
            "get_rng_state_all": lambda: [self._get_rng_state(i) for i in range(me.gpus)],
            "set_rng_state_all": lambda states: [self._set_rng_state(s, i) for i, s in enumerate(states)],
            "Stream": Stream,
            "Event": Event,
            "current_stream": lambda device=None: Stream(device),
            "default_stream": lambda device=None: Stream(device),
            "set_stream": lambda stream: None,
            "stream": lambda stream=None: contextlib.nullcontext(stream),
            "device": device,
            "device_of": device_of,
        }
        for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                     "max_memory_reserved", "memory_cached", "max_memory_cached"):
            simple[name] = lambda device=None: 0
        for name in ("reset_peak_memory_stats", "reset_max_memory_allocated",
                     "reset_max_memory_cached", "reset_accumulated_memory_stats"):
            simple[name] = lambda device=None: None
        for name, fn in simple.items():
            if hasattr(cuda, name):
                self.patch(cuda, name, fn)
        nvtx = getattr(cuda, "nvtx", None)
        if nvtx is not None:
            for name in ("range_push", "range_pop", "mark"):
                if hasattr(nvtx, name):
                    self.patch(nvtx, name, lambda *a, **k: 0)
            if hasattr(nvtx, "range"):
                self.patch(nvtx, "range", lambda *a, **k: contextlib.nullcontext())

    @staticmethod
    def _memory_per_device():
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return 16 << 30

    def _get_rng_state(self, device="cuda"):
        index = device_index(device, self.current)
        state = self._rng_states.get(index)
        return state.clone() if state is not None else self._torch.get_rng_state()

    def _set_rng_state(self, new_state, device="cuda"):
        self._rng_states[device_index(device, self.current)] = new_state.clone()

    def _placement(self, torch):
        me = self
        Tensor = torch.Tensor

        def cpu_args(args, kwargs, pos=0):
            """The arguments with a CUDA device (kwargs["device"], or args[pos]) set to the CPU."""
            d = kwargs.get("device")
            if d is not None and is_cuda_device(d):
                me.note_device(d)
                kwargs = dict(kwargs)
                kwargs["device"] = "cpu"
            if len(args) > pos and is_cuda_device(args[pos]):
                me.note_device(args[pos])
                args = args[:pos] + ("cpu",) + args[pos + 1:]
            return args, kwargs

        def with_cpu_device(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                d = kwargs.get("device")
                if d is not None and is_cuda_device(d):
                    me.note_device(d)
                    kwargs["device"] = "cpu"
                return fn(*args, **kwargs)
            return wrapper

        for name in FACTORIES:
            fn = getattr(torch, name, None)
            if fn is not None:
                self.patch(torch, name, with_cpu_device(fn))
        for name in TENSOR_FACTORIES:
            fn = getattr(Tensor, name, None)
            if fn is not None:
                self.patch(Tensor, name, with_cpu_device(fn))

        def placing_on_cpu(method):
            """``Tensor.to`` / ``Module.to`` with a CUDA device argument made the CPU."""
            @functools.wraps(method)
            def to(self, *args, **kwargs):
                if args or "device" in kwargs:
                    args, kwargs = cpu_args(args, kwargs)
                return method(self, *args, **kwargs)
            return to

        def cuda_method(self, device=None, non_blocking=False, **kwargs):
            me.note_device(device)
            return self

        tensor_type = Tensor.type

        @functools.wraps(tensor_type)
        def type_(self, dtype=None, non_blocking=False, **kwargs):
            if dtype is None:
                return tensor_type(self)
            return tensor_type(self, me._cpu_tensor_type(dtype), non_blocking, **kwargs)

        self.patch(Tensor, "to", placing_on_cpu(Tensor.to))
        self.patch(Tensor, "cuda", cuda_method)
        self.patch(Tensor, "type", type_)
        self.patch(Tensor, "pin_memory", lambda self, device=None: self)
        for storage in (getattr(torch, "UntypedStorage", None), getattr(torch, "TypedStorage", None),
                        getattr(getattr(torch, "storage", None), "_StorageBase", None)):
            if storage is not None and hasattr(storage, "cuda"):
                self.patch(storage, "cuda", cuda_method)
            if storage is not None and hasattr(storage, "pin_memory"):
                self.patch(storage, "pin_memory", lambda self, device=None: self)

        Module = torch.nn.Module
        self.patch(Module, "to", placing_on_cpu(Module.to))
        self.patch(Module, "cuda", cuda_method)

        load = torch.load

        @functools.wraps(load)
        def load_on_cpu(f, map_location=None, *args, **kwargs):
            return load(f, me._cpu_map_location(map_location), *args, **kwargs)

        self.patch(torch, "load", load_on_cpu)
        set_default = getattr(torch, "set_default_tensor_type", None)
        if set_default is not None:
            self.patch(torch, "set_default_tensor_type",
                       functools.wraps(set_default)(lambda t: set_default(me._cpu_tensor_type(t))))

    def _cpu_tensor_type(self, t):
        """"torch.FloatTensor" for "torch.cuda.FloatTensor" (a name or the type); others as given."""
        name = t if isinstance(t, str) else "%s.%s" % (getattr(t, "__module__", ""),
                                                      getattr(t, "__name__", ""))
        if not name.startswith("torch.cuda."):
            return t
        self.note_device(None)
        return "torch." + name[len("torch.cuda."):]

    def _cpu_map_location(self, m):
        """``torch.load``'s map_location with every CUDA location restored on the CPU: None, a
        CUDA device, or a dict become "cpu"; a callable still runs (its ``storage.cuda(i)`` is
        served), and what it leaves to torch is restored on the CPU."""
        if m is None or isinstance(m, dict) or is_cuda_device(m):
            if m is not None:
                self.note_device(m if not isinstance(m, dict) else None)
            return "cpu"
        if callable(m) and not isinstance(m, str):
            def on_cpu(storage, location):
                result = m(storage, location)
                return storage if result is None else result
            return on_cpu
        return m

    def _precision(self, torch):
        me = self
        autocast = getattr(torch, "autocast", None)
        if isinstance(autocast, type):
            init = autocast.__init__

            @functools.wraps(init)
            def autocast_init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
                # torch.cuda.amp.autocast comes here too (its __init__ calls this one).
                if device_type == "cuda":
                    me.note_device(None)
                    if me.autocast == "bf16":
                        device_type, dtype = "cpu", torch.bfloat16
                    else:
                        enabled = False
                return init(self, device_type, dtype=dtype, enabled=enabled,
                            cache_enabled=cache_enabled)

            self.patch(autocast, "__init__", autocast_init)
        for owner in (getattr(getattr(torch, "amp", None), "GradScaler", None),
                      getattr(getattr(torch.cuda, "amp", None), "GradScaler", None)):
            if isinstance(owner, type) and "__init__" in owner.__dict__:
                self.patch(owner, "__init__", self._pass_through_scaler(owner.__init__))

    def _pass_through_scaler(self, init):
        """GradScaler.__init__ with ``enabled=False`` (and ``device="cpu"`` where it has one):
        torch's own disabled scaler, whose ``scale`` returns its argument and ``step`` steps."""
        me = self
        signature = inspect.signature(init)

        @functools.wraps(init)
        def scaler_init(*args, **kwargs):
            me.note_device(None)
            bound = signature.bind(*args, **kwargs)
            bound.arguments["enabled"] = False
            if bound.arguments.get("device") == "cuda":
                bound.arguments["device"] = "cpu"
            return init(*bound.args, **bound.kwargs)

        return scaler_init

    def _distributed(self, torch):
        me = self
        dist = torch.distributed
        if not dist.is_available():
            return
        c10d = dist.distributed_c10d

        def rebind(fn, change, after=None):
            """fn with its arguments bound by name, changed by ``change(arguments)``; ``after()``
            runs once fn returned."""
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                bound = signature.bind(*args, **kwargs)
                change(bound.arguments)
                result = fn(*bound.args, **bound.kwargs)
                if after is not None:
                    after()
                return result
            return wrapper

        def on_gloo(arguments):
            asked = arguments.get("backend")
            ran = cpu_backend(asked)
            if ran != asked:
                arguments["backend"] = ran
                arguments.pop("pg_options", None)
                return str(asked) if asked is not None else None
            return None

        def init_change(arguments):
            asked = on_gloo(arguments)
            if asked is not None:
                me.asked_backend = asked

        def barrier_change(arguments):
            arguments.pop("device_ids", None)

        def joined():
            me.joined = True
            if me.asked_backend is not None or me.asked_devices:
                me.record()

        for name, change, after in (("init_process_group", init_change, joined),
                                    ("new_group", on_gloo, None),
                                    ("barrier", barrier_change, None)):
            fn = getattr(c10d, name, None)
            if fn is None:
                continue
            wrapper = rebind(fn, change, after)
            for mod in (dist, c10d):
                if getattr(mod, name, None) is fn:
                    self.patch(mod, name, wrapper)
        if hasattr(dist, "is_nccl_available"):
            self.patch(dist, "is_nccl_available", lambda: True)
        ddp = torch.nn.parallel.DistributedDataParallel
        ddp_init = ddp.__init__

        @functools.wraps(ddp_init)
        def ddp_on_cpu(self, module, device_ids=None, output_device=None, *args, **kwargs):
            for d in (device_ids or ()):
                me.note_device(d)
            return ddp_init(self, module, None, None, *args, **kwargs)

        self.patch(ddp, "__init__", ddp_on_cpu)

    def _sync_batchnorm(self, torch):
        """nn.SyncBatchNorm on CPU input (sync_batchnorm_on_cpu.py), and DDP that accepts it."""
        sync_bn = torch.nn.SyncBatchNorm
        self.patch(sync_bn, "forward", sync_batchnorm_on_cpu.forward_on_cpu(sync_bn.forward))
        ddp = torch.nn.parallel.DistributedDataParallel
        if hasattr(ddp, "_passing_sync_batchnorm_handle"):
            self.patch(ddp, "_passing_sync_batchnorm_handle",
                       sync_batchnorm_on_cpu.ddp_allows_cpu_sync_batchnorm)

    def _accelerator(self, torch):
        acc = getattr(torch, "accelerator", None)
        if acc is None:
            return
        me = self
        served = {
            "is_available": lambda: True,
            "device_count": lambda: me.gpus,
            "current_accelerator": lambda *a, **k: torch.device("cuda"),
            "current_device_index": lambda: me.current,
            "current_device_idx": lambda: me.current,
            "set_device_index": lambda device: torch.cuda.set_device(device),
            "set_device_idx": lambda device: torch.cuda.set_device(device),
            "synchronize": lambda device=None: None,
        }
        for name, fn in served.items():
            if hasattr(acc, name):
                self.patch(acc, name, fn)
