"""Models whose gradients the program averages itself, without DDP (NOTE [Hand-written gradient
averaging], docs/audit.md).

A loop that calls ``dist.all_reduce(p.grad)`` for each parameter (or of all of them flattened into
one buffer) and steps its optimizer promises what DDP promises: equal replicas after every step,
provided they start equal. The optimizers the program builds are tracked (weakly); the first
all_reduce of one's parameter's ``.grad``, or of a buffer as large as all its gradients, declares
its parameters a replica: a ``ddp`` line with ``"averaged_by": "all_reduce"``, whose hash then
appears in the ``params`` of every ``epoch`` line and at the end, as a DDP module's does. Nothing
is declared while a DDP module is alive (DDP averages then)."""

import functools
import importlib
import math
import sys
import types
import weakref

from . import trace_events
from .ddp_registry import DdpModuleState
from .instrumentor import Instrumentor


class _Replica:
    """One optimizer's parameters (those of ``among``, ids, when given), hashed as a module is
    (params_hash.module_hash)."""

    def __init__(self, optimizer, among=None):
        self._optimizer = weakref.ref(optimizer)
        self._among = among
        self.module = self  # what ddp_registry hashes at the end

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_parameters(self):
        optimizer = self._optimizer()
        if optimizer is None:
            return []
        params = [p for g in optimizer.param_groups for p in g["params"]]
        return [(str(k), p) for k, p in enumerate(params)
                if self._among is None or id(p) in self._among]


class HandAveraging:
    """The optimizers the program built and the replicas their all-reduced gradients declared.
    A shared service of one recording session (session.py): the optimizer instrumentor tracks,
    the distributed one shows it every all_reduce's tensor."""

    def __init__(self, recorder, ddp):
        self.recorder = recorder
        self.ddp = ddp  # ddp_registry.DdpRegistry: a replica is declared as a DDP module is
        self._optimizers = weakref.WeakSet()
        # optimizer -> its _Replica (kept alive with it)
        self._replicas = weakref.WeakKeyDictionary()

    def track(self, optimizer):
        """An optimizer was built (torch.optim.Optimizer.__init__)."""
        self._optimizers.add(optimizer)

    def note_reduced(self, tensor):
        """The program all-reduces ``tensor``: if it is an untracked optimizer's parameter
        gradient, declare that optimizer's parameters a replica."""
        if not self._optimizers:
            return
        if any(not isinstance(m, _Replica) for m, _ in self.ddp.live()):
            return
        for optimizer in list(self._optimizers):
            if optimizer in self._replicas:
                continue
            if _is_flat_gradients(optimizer, tensor):
                self._declare(optimizer)
                return
            for group in optimizer.param_groups:
                if any(_is_gradient(p, tensor) for p in group["params"]):
                    self._declare(optimizer)
                    return

    def declare_outside_ddp(self, optimizer):
        """At an optimizer's first step while a DDP module is alive: the trainable parameters it
        steps that no live DDP module holds (a GAN's generator left unwrapped, a loss weight
        outside the model) are a replica too, nothing averaging their gradients (NOTE [Parameters
        outside DDP], docs/audit.md): a ``ddp`` line with ``"outside_ddp": true``."""
        if optimizer in self._replicas:
            return
        modules = [m for m, _ in self.ddp.live() if not isinstance(m, _Replica)]
        if not modules:
            return
        held = {id(p) for m in modules for p in m.parameters()}
        outside = {id(p) for g in optimizer.param_groups for p in g["params"]
                   if p.requires_grad and id(p) not in held}
        if outside:
            self._declare(optimizer, outside)

    def _declare(self, optimizer, outside=None):
        replica = _Replica(optimizer, outside)
        self._replicas[optimizer] = replica
        st = DdpModuleState(self.recorder.next_id("ddp"))
        st.watched = False
        self.ddp.add(replica, st)
        params = replica.parameters()
        fields = {"outside_ddp": True} if outside is not None else {"averaged_by": "all_reduce"}
        self.recorder.emit(trace_events.DDP, id=st.id, module=type(optimizer).__name__,
                           parameters=int(sum(p.numel() for p in params)),
                           device=str(params[0].device) if params else "cpu", buffers=0,
                           **fields)


class OptimizerInstrumentor(Instrumentor):
    """``torch.optim.Optimizer.__init__``: every optimizer the program builds is tracked."""

    NAME = "the optimizer instrumentor"
    MODULE = "torch.optim"
    SUPPORTED_TORCH = ((1, 13), (2, 14))

    def _instrument(self):
        optim = sys.modules.get(self.MODULE) or importlib.import_module(self.MODULE)
        fn = optim.Optimizer.__dict__.get("__init__")
        if fn is None or hasattr(fn, "__ddph_original__"):
            return
        rec, averaging = self.session.recorder, self.session.averaging
        track = averaging.track
        steps = _SampledSteps(averaging.ddp)

        @functools.wraps(fn)
        def __init__(self, *args, **kwargs):
            fn(self, *args, **kwargs)
            if rec.active:
                track(self)
                _watch_step(self, rec, steps, averaging)

        __init__.__ddph_original__ = fn
        self.patch(optim.Optimizer, "__init__", __init__)


def _is_gradient(param, tensor):
    """``tensor`` is ``param.grad`` or a view of all of it (``param.grad.data``, a new object over
    the same storage, as older tutorials all-reduce)."""
    grad = param.grad
    if grad is None:
        return False
    if grad is tensor:
        return True
    try:
        return (tensor.data_ptr() == grad.data_ptr() and tensor.shape == grad.shape
                and tensor.dtype == grad.dtype)
    except Exception:  # a tensor without storage (sparse, meta): not this one
        return False


def _is_flat_gradients(optimizer, tensor):
    """``tensor`` is the optimizer's gradients flattened into one buffer (``torch.cat`` of every
    ``p.grad.view(-1)``, a bucket of the program's own): a floating tensor with as many elements
    as all its parameters that have a gradient, more than one."""
    try:
        n = tensor.numel()
        if n < 2 or not tensor.is_floating_point():
            return False
        total = sum(p.numel() for g in optimizer.param_groups for p in g["params"]
                    if p.grad is not None)
    except Exception:  # a tensor without a size (sparse, meta), an odd parameter group
        return False
    return total == n


def _first_lr(optimizer):
    """The learning rate of the optimizer's first parameter group, as a float, or None."""
    try:
        lr = float(optimizer.param_groups[0]["lr"])
    except Exception:  # no groups, no lr, an lr that is no number
        return None
    return lr if math.isfinite(lr) else None


class _SampledSteps:
    """The process's optimizer steps, counted across its optimizers; on the first four, every
    power of two after them and each optimizer's first, the gradients each live DDP module (or
    hand-averaged replica) holds are hashed (a ``step``'s ``grads``, with ``state``: how many
    parameters the optimizer held state for before the step): replicas that part although DDP
    averaged the gradients are then told apart by whether the gradients the steps used differed
    (NOTE [Gradients at the step], docs/audit.md). Sampled, so that a long run hashes its
    gradients a few dozen times."""

    def __init__(self, ddp):
        self._ddp = ddp
        self._count = 0

    def gradients(self, first_of_its_optimizer):
        """{"<ddp id>": hash} for this step when it is sampled (also the first step of each
        optimizer: a resumed phase's), else None."""
        self._count += 1
        n = self._count
        if n > 4 and n & (n - 1) and not first_of_its_optimizer:
            return None
        try:
            return self._ddp.live_gradient_hashes() or None
        except Exception:  # a gradient that cannot be read back (freed, on a lost device)
            return None


def _watch_step(optimizer, rec, steps, averaging):
    """A ``step`` line after each ``optimizer.step()`` returns: when the program averages its
    gradients itself, the order of its all_reduces and its steps tells whether the step used the
    averaged gradients. A bound method on the instance (LR schedulers rebind ``step`` through
    ``__func__``); what the step returns is returned."""
    original = optimizer.step
    taken = [0]

    def step(self, *args, **kwargs):
        lr = _first_lr(self) if rec.active else None  # this step's rate (a scheduler's comes after)
        taken[0] += 1
        if taken[0] == 1 and rec.active:
            try:
                averaging.declare_outside_ddp(self)
            except Exception:  # an odd parameter group: nothing declared, recording goes on
                pass
        # what this step is about to apply, and the state it applies it with
        grads = steps.gradients(taken[0] == 1) if rec.active else None
        # ZeroRedundancyOptimizer shards its state across the ranks by design: not compared
        sharded = type(self).__name__ == "ZeroRedundancyOptimizer"
        state = len(getattr(self, "state", ())) if grads and not sharded else None
        out = original(*args, **kwargs)
        if rec.active:
            fields = {"optimizer": type(self).__name__}
            if lr is not None:
                fields["lr"] = lr
            if grads:
                fields["grads"] = grads
            if state is not None:
                fields["state"] = state
            rec.emit(trace_events.STEP, **fields)
        return out

    optimizer.step = types.MethodType(step, optimizer)
