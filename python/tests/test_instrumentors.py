"""The recorder's instrumentors in one process, one at a time: what each writes, that
``instrument()`` and ``uninstrument()`` are idempotent, and that an uninstrument round trip leaves
torch exactly as it found it (every attribute it patched is the original object again, and none
is left behind). Also: ``recorder.suppressed()``, and the package's import graph (no cycle; the
shared services are leaves; no module holds state of its own but the registry's one object)."""

import ast
import os
import sys
import tempfile
import threading
import unittest

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.utils.data.dataloader as dataloader
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset

from ddph_audit import process_hooks
from ddph_audit.data_instrumentor import DataInstrumentor
from ddph_audit.ddp_instrumentor import DdpInstrumentor
from ddph_audit.environment import AUDIT_RANK_PID, AUDIT_SPAWNER
from ddph_audit.distributed_instrumentor import DistributedInstrumentor
from ddph_audit.recorder import Recorder
from ddph_audit.session import Session
from ddph_audit.spawned_ranks import SpawnedRanksInstrumentor
from tests import support

PACKAGE = os.path.join(support.PYTHON_DIR, "ddph_audit")


class EpochSampler(Sampler):
    """A program's own sampler with set_epoch (wrapped when a DataLoader meets it)."""

    def __init__(self, n):
        self.n, self.epoch = n, 0

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n

    def set_epoch(self, epoch):
        self.epoch = epoch


def snapshot(owners):
    return [dict(vars(owner)) for owner in owners]


class InstrumentorCase(unittest.TestCase):
    """A recording session of its own writing rank-0.jsonl of a world of 1 into a private
    folder; ``OWNERS`` the modules and classes the instrumentor under test may patch."""

    OWNERS = ()

    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.env = support.saved_environment("RANK", "WORLD_SIZE", AUDIT_RANK_PID)
        os.environ.update(RANK="0", WORLD_SIZE="1")
        self.session = Session(self.folder.name)
        self.session.start()
        self.before = snapshot(self.OWNERS)
        self.instrumentors = []

    def tearDown(self):
        for instrumentor in reversed(self.instrumentors):
            instrumentor.uninstrument()
        if dist.is_initialized():
            dist.destroy_process_group()
        self.session.recorder.writer.close()
        self.session.recorder.stop()
        support.restore_environment(self.env)
        self.folder.cleanup()

    def instrumented(self, instrumentor):
        instrumentor.instrument()
        instrumentor.instrument()  # idempotent
        self.instrumentors.append(instrumentor)
        return instrumentor

    def events(self, *kinds):
        lines = support.read_trace(os.path.join(self.folder.name, "rank-0.jsonl"))
        return [e for e in lines if not kinds or e["ev"] in kinds]

    def join_world(self):
        dist.init_process_group("gloo", init_method="file://" + os.path.join(self.folder.name, "store"),
                                rank=0, world_size=1)

    def assert_round_trip(self, instrumentor):
        """Uninstrument (twice): every owner's attributes are the very objects they were."""
        self.assertNotEqual(snapshot(self.OWNERS), self.before, "nothing was patched")
        instrumentor.uninstrument()
        instrumentor.uninstrument()  # idempotent
        self.assertFalse(instrumentor.instrumented)
        for owner, old, new in zip(self.OWNERS, self.before, snapshot(self.OWNERS)):
            name = getattr(owner, "__name__", repr(owner))
            self.assertEqual(set(old), set(new), name)
            for attr in old:
                self.assertIs(old[attr], new[attr], "%s.%s" % (name, attr))


class DistributedInstrumentorTest(InstrumentorCase):
    OWNERS = (dist, dist.distributed_c10d)

    def test_collectives_groups_and_destroy_are_recorded(self):
        self.instrumented(DistributedInstrumentor(self.session))
        self.join_world()
        t = torch.ones(3)
        dist.all_reduce(t)
        dist.all_gather_object([None], {"a": 1})  # all_gather inside: only the outermost
        group = dist.new_group([0])
        dist.broadcast(t, 0, group=group)
        dist.destroy_process_group()
        pg, = self.events("process_group")
        self.assertEqual((pg["backend"], pg["rank"], pg["world_size"]), ("gloo", 0, 1))
        colls = self.events("coll")
        self.assertEqual([(c["group"], c["seq"], c["op"]) for c in colls],
                         [("0", 0, "all_reduce"), ("0", 1, "all_gather_object"),
                          ("1", 0, "broadcast")])
        self.assertEqual((colls[0]["dtype"], colls[0]["numel"], colls[0]["reduce"]),
                         ("float32", 3, "SUM"))
        done = [(e["group"], e["seq"]) for e in self.events("coll_done")]
        self.assertEqual(done, [("0", 0), ("0", 1), ("1", 0)])
        self.assertEqual(self.events("group"), [dict(self.events("group")[0], id="1", ranks=[0])])
        destroy, = self.events("destroy")
        self.assertEqual((destroy["group"], destroy["ddp_alive"]), ("0", []))

    def test_nothing_is_recorded_inside_suppressed(self):
        self.instrumented(DistributedInstrumentor(self.session))
        self.join_world()
        with self.session.recorder.suppressed():
            dist.all_reduce(torch.ones(1))
        self.assertEqual(self.events("coll"), [])

    def test_uninstrument_leaves_torch_as_it_found_it(self):
        self.assert_round_trip(self.instrumented(DistributedInstrumentor(self.session)))


class DataInstrumentorTest(InstrumentorCase):
    OWNERS = (DistributedSampler, EpochSampler, DataLoader, dataloader._BaseDataLoaderIter)

    def test_samplers_loaders_passes_and_batches_are_recorded(self):
        data = self.instrumented(DataInstrumentor(self.session))
        dataset = TensorDataset(torch.arange(10.0))
        sampler = DistributedSampler(dataset, num_replicas=1, rank=0, seed=3)
        loader = DataLoader(dataset, batch_size=4, sampler=sampler)
        custom = DataLoader(dataset, batch_size=5, sampler=EpochSampler(10))
        for epoch in range(2):
            sampler.set_epoch(epoch)
            custom.sampler.set_epoch(epoch)
            self.assertEqual(sum(len(b[0]) for b in loader), 10)
        self.assertEqual([len(b[0]) for b in custom], [5, 5])
        samplers = self.events("sampler")
        self.assertEqual([(s["id"], s["order"]) for s in samplers],
                         [(0, "torch-distributed"), (1, "recorded")])
        self.assertEqual(samplers[0]["seed"], 3)
        self.assertEqual([(e["sampler"], e["epoch"]) for e in self.events("set_epoch")],
                         [(0, 0), (1, 0), (0, 1), (1, 1)])
        self.assertEqual([e["batches"] for e in self.events("epoch_end")], [3, 3, 2])
        batches = self.events("batch")
        self.assertEqual([b["size"] for b in batches], [4, 4, 2, 4, 4, 2, 5, 5])
        self.assertEqual(batches[-1]["idx"], {"runs": [[5, 5]]})  # a recorded order: its indices
        self.assertIsNotNone(data.samplers.get(sampler))

    def test_uninstrument_leaves_torch_as_it_found_it(self):
        data = self.instrumented(DataInstrumentor(self.session))
        DataLoader(TensorDataset(torch.arange(4.0)), sampler=EpochSampler(4))  # wraps its class
        self.assertTrue(hasattr(EpochSampler.__dict__["set_epoch"], "__ddph_original__"))
        self.assert_round_trip(data)


class DdpInstrumentorTest(InstrumentorCase):
    OWNERS = (DDP,)

    def setUp(self):
        super().setUp()
        self.registry = self.session.ddp
        self.join_world()
        torch.manual_seed(0)

    def train(self, model, steps=2):
        for _ in range(steps):
            model(torch.ones(4, 3)).sum().backward()

    def test_construction_forwards_and_buckets_are_recorded(self):
        self.instrumented(DdpInstrumentor(self.session))
        model = DDP(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1)))
        self.train(model)
        with torch.no_grad():
            model(torch.ones(1, 3))
        ddp, = self.events("ddp")
        self.assertEqual((ddp["id"], ddp["module"], ddp["parameters"]), (0, "Sequential", 21))
        self.assertEqual([(f["n"], f["grad"], f["sync"]) for f in self.events("forward")],
                         [(0, True, True), (1, True, True), (2, False, True)])
        colls = self.events("coll")
        self.assertEqual([(c["src"], c["ddp"], c["backward"], c["seq"]) for c in colls],
                         [("ddp", 0, 0, 0), ("ddp", 0, 1, 1)])
        self.assertEqual(sum(c["numel"] for c in colls), 42)
        self.assertEqual([e["seq"] for e in self.events("coll_done")], [0, 1])
        self.assertEqual(self.registry.live_ids(), [0])
        self.registry.write_end_params()
        self.assertEqual([p["at"] for p in self.events("params")], ["end"])

    def test_a_program_hook_is_recorded_around_it(self):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        self.instrumented(DdpInstrumentor(self.session))
        model = DDP(nn.Linear(3, 1))
        model.register_comm_hook(None, allreduce_hook)
        self.train(model)
        self.registry.poll_futures()
        colls = self.events("coll")
        self.assertEqual([(c["op"], c["hook"], c["backward"]) for c in colls],
                         [("comm_hook", "allreduce_hook", 0), ("comm_hook", "allreduce_hook", 1)])
        self.assertEqual([e["seq"] for e in self.events("coll_done")], [0, 1])

    def test_uninstrument_leaves_torch_as_it_found_it(self):
        ddp = self.instrumented(DdpInstrumentor(self.session))
        model = DDP(nn.Linear(3, 1))
        self.train(model, 1)
        watch = self.registry.get(model).watch
        self.assertIsNotNone(watch.handle)  # the parameter hook, removed by uninstrument
        self.assert_round_trip(ddp)
        self.assertIsNone(watch.handle)


class ProcessInstrumentorTest(InstrumentorCase):
    OWNERS = (sys,)

    def snapshot_hooks(self):
        return sys.excepthook, sys.exit

    def test_an_uncaught_error_and_sys_exit_are_recorded(self):
        seen = []
        before, sys.excepthook = sys.excepthook, lambda *args: seen.append(args[0])
        try:
            instrumentor = self.instrumented(process_hooks.ProcessInstrumentor(self.session))
            try:
                raise ValueError("corrupt sample 28")
            except ValueError as e:
                sys.excepthook(type(e), e, e.__traceback__)  # as the interpreter calls it
            self.assertEqual(seen, [ValueError], "the hook it replaced runs after it")
            with self.assertRaises(SystemExit):
                sys.exit(3)
        finally:
            sys.excepthook = before
        self.assertEqual(self.session.recorder.exit_code, 3)
        errors = self.events("error")
        self.assertEqual([e["type"] for e in errors], ["ValueError"])
        self.assertIn("corrupt sample 28", errors[0]["message"])

    def test_uninstrument_leaves_torch_as_it_found_it(self):
        before = self.snapshot_hooks()
        instrumentor = self.instrumented(process_hooks.ProcessInstrumentor(self.session))
        self.assertNotEqual(self.snapshot_hooks(), before)
        self.assert_round_trip(instrumentor)
        self.assertEqual(self.snapshot_hooks(), before)

    def test_a_hook_the_program_set_afterwards_stays(self):
        before = sys.excepthook
        instrumentor = self.instrumented(process_hooks.ProcessInstrumentor(self.session))

        def programs_hook(*args):
            return None

        sys.excepthook = programs_hook
        try:
            instrumentor.uninstrument()
            self.assertIs(sys.excepthook, programs_hook)
        finally:
            sys.excepthook = before


SPAWN = sys.modules["torch.multiprocessing.spawn"]  # the module (the package's `spawn` is a function)


class SpawnedRanksInstrumentorTest(InstrumentorCase):
    """torch's own entries are replaced by stand-ins first: the real ``_wrap`` would set this test
    process's parent-death signal, the real ``start_processes`` start processes."""

    OWNERS = (SPAWN, torch.multiprocessing)

    def setUp(self):
        super().setUp()
        self.saved = {name: getattr(SPAWN, name) for name in ("_wrap", "start_processes")}
        self.seen = {}

        def torch_wrap(fn, i, args, error_queue):  # torch 1.13's, less the prctl
            try:
                fn(i, *args)
            except Exception:
                error_queue.append("traceback")
                sys.exit(1)

        def torch_start(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
            self.seen["spawner"] = os.environ.get(AUDIT_SPAWNER)
            return "started"

        SPAWN._wrap, SPAWN.start_processes = torch_wrap, torch_start
        self.before = snapshot(self.OWNERS)

    def tearDown(self):
        super().tearDown()
        for name, value in self.saved.items():
            setattr(SPAWN, name, value)

    def test_a_rank_error_is_recorded_before_torch_catches_it(self):
        self.instrumented(SpawnedRanksInstrumentor(self.session))

        def rank_main(i):
            raise ValueError("corrupt batch on rank %d" % i)

        queue = []
        with self.assertRaises(SystemExit):
            SPAWN._wrap(rank_main, 1, (), queue)
        self.assertEqual(queue, ["traceback"], "torch's entry still sends it to the parent")
        self.assertEqual([e["type"] for e in self.events("error")], ["ValueError"])
        self.assertEqual(len(self.events("end")), 1, "the rank writes its own end")

    def test_the_spawning_process_becomes_a_spawner(self):
        self.instrumented(SpawnedRanksInstrumentor(self.session))
        self.assertEqual(SPAWN.start_processes(print, nprocs=2), "started")
        self.assertEqual(self.seen["spawner"], str(os.getpid()), "its children know their parent")
        self.assertNotIn(AUDIT_SPAWNER, os.environ)
        self.assertTrue(os.path.exists(os.path.join(self.folder.name, "spawner-%d.jsonl" % os.getpid())))

    def test_uninstrument_leaves_torch_as_it_found_it(self):
        self.assert_round_trip(self.instrumented(SpawnedRanksInstrumentor(self.session)))


class SuppressedTest(unittest.TestCase):
    def test_nests_and_is_per_thread(self):
        recorder = Recorder()
        self.assertFalse(recorder.is_suppressed())
        with recorder.suppressed():
            with recorder.suppressed():
                self.assertTrue(recorder.is_suppressed())
            self.assertTrue(recorder.is_suppressed())
            self.assertFalse(recorder.is_suppressed(recorder.SET_EPOCH))
            seen = []
            thread = threading.Thread(target=lambda: seen.append(recorder.is_suppressed()))
            thread.start()
            thread.join()
            self.assertEqual(seen, [False])
        self.assertFalse(recorder.is_suppressed())

    def test_an_exception_leaves_the_scope(self):
        recorder = Recorder()
        with self.assertRaises(ValueError):
            with recorder.suppressed():
                raise ValueError("x")
        self.assertFalse(recorder.is_suppressed())


def package_imports():
    """{module: set of ddph_audit modules it imports, at its top or inside a function}."""
    graph = {}
    for name in sorted(os.listdir(PACKAGE)):
        if not name.endswith(".py"):
            continue
        module = name[:-3]
        with open(os.path.join(PACKAGE, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    found.add(node.module.split(".")[0])
                else:
                    found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ddph_audit"):
                parts = node.module.split(".")
                found.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
        graph[module] = {m for m in found if os.path.exists(os.path.join(PACKAGE, m + ".py"))
                         and m != module}
    return graph


class ImportGraphTest(unittest.TestCase):
    def test_no_module_imports_itself_through_others(self):
        graph = package_imports()
        state = {}

        def visit(module, path):
            state[module] = "open"
            for m in sorted(graph.get(module, ())):
                if state.get(m) == "open":
                    self.fail("import cycle: %s" % " -> ".join(path + [m]))
                if m not in state:
                    visit(m, path + [m])
            state[module] = "done"

        for module in sorted(graph):
            if module not in state:
                visit(module, [module])

    def test_shared_services_import_no_instrumentor(self):
        graph = package_imports()
        for leaf in ("trace_events", "trace_writer", "recorder", "groups", "ddp_registry",
                     "object_registry", "params_hash"):
            self.assertFalse({m for m in graph[leaf] if m.endswith("instrumentor")
                              or m in ("ddp_backward_watch", "process_hooks")}, leaf)


# What a module may make at its top: markers, compiled patterns, functions. Anything else made
# there (a dict to fill, a lock, a WeakSet, an instance) is state, and belongs on an instance.
_STATELESS_CALLS = {"object", "re.compile", "_make_dumps"}
_THE_ONE_STATE = ("__init__", "_THIS_PROCESS")  # this process's registry.Instrumentation


def module_state(path):
    """[(name, what)] of the state a module keeps outside any instance: names rebound by a
    ``global`` statement, empty containers and objects made at its top."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = [(name, "global") for node in ast.walk(tree) if isinstance(node, ast.Global)
             for name in node.names]
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        empty = isinstance(value, (ast.Dict, ast.List, ast.Set)) and not (
            getattr(value, "keys", None) or getattr(value, "elts", None))
        made = isinstance(value, ast.Call) and ast.unparse(value.func) not in _STATELESS_CALLS
        if empty or made:
            found += [(t.id, ast.unparse(value)) for t in node.targets if isinstance(t, ast.Name)]
    return found


class ModuleStateTest(unittest.TestCase):
    def test_the_recorder_keeps_its_state_on_instances(self):
        for name in sorted(os.listdir(PACKAGE)):
            if name.endswith(".py"):
                state = [(v, what) for v, what in module_state(os.path.join(PACKAGE, name))
                         if (name[:-3], v) != _THE_ONE_STATE]
                self.assertEqual(state, [], name)
        self.assertEqual([v for v, _ in module_state(os.path.join(PACKAGE, "__init__.py"))],
                         [_THE_ONE_STATE[1]])


if __name__ == "__main__":
    unittest.main()
