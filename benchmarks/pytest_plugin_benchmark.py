"""20 small distributed tests at W = 4: ddph_pytest's marker against PyTorch's MultiProcessTestCase.

The same 20 test bodies (collectives, point-to-point, object collectives, a subgroup) are written
twice into a temporary folder: as ``@pytest.mark.distributed(world_size=4)`` functions, and as
methods of a ``torch.testing._internal.common_distributed.MultiProcessTestCase`` subclass that
starts its ranks in ``setUp`` as PyTorch's own gloo tests do (``_spawn_processes``; the same
class's ``_start_processes`` with the fork context is measured too, which torch 1.13 no longer
offers as a method) and joins a gloo group through a FileStore. Each file
is run by the same pytest (``python3 -m pytest -q``), the runs interleaved, and the wall time of
each whole pytest process is taken; medians of the repeats and their ratios are printed.

    python3 benchmarks/pytest_plugin_benchmark.py [--repeats 3] [--ddp-sim build/bin/ddp-sim]

Debian has no ``expecttest``, which torch's internal test utilities import for their base class
only: a stub module (``ACCEPT = False`` and ``TestCase = unittest.TestCase``) is written beside
the files for the MultiProcessTestCase runs; it is imported once per process and runs no code of
the tests. (A DDP step is not among the bodies: under MultiProcessTestCase's spawned ranks, torch
1.13's ``torch.distributed._shard`` fails to import on Python 3.11, "mutable default ... for field
tensor_properties", and the test fails there.)
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

WORLD = 4
RUN_TIMEOUT_S = 1800

# name -> body; `rank` and `world_size` are in scope, torch as torch, torch.distributed as dist.
BODIES = {
    "all_reduce_sum": "t = torch.tensor([float(rank)]); dist.all_reduce(t)\n"
                      "assert t.item() == sum(range(world_size))",
    "all_reduce_max": "t = torch.tensor([float(rank)]); dist.all_reduce(t, op=dist.ReduceOp.MAX)\n"
                      "assert t.item() == world_size - 1",
    "all_reduce_min": "t = torch.tensor([float(rank) + 1]); dist.all_reduce(t, op=dist.ReduceOp.MIN)\n"
                      "assert t.item() == 1",
    "all_reduce_product": "t = torch.tensor([2.0]); dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)\n"
                          "assert t.item() == 2 ** world_size",
    "all_reduce_int64": "t = torch.arange(8) * rank; dist.all_reduce(t)\n"
                        "assert t.tolist() == [i * sum(range(world_size)) for i in range(8)]",
    "all_reduce_big": "t = torch.ones(1 << 16); dist.all_reduce(t)\n"
                      "assert bool((t == world_size).all())",
    "broadcast": "t = torch.tensor([float(rank)]); dist.broadcast(t, src=1)\nassert t.item() == 1",
    "broadcast_from_last": "t = torch.full((4,), float(rank)); dist.broadcast(t, src=world_size - 1)\n"
                           "assert t.tolist() == [world_size - 1.0] * 4",
    "all_gather": "out = [torch.zeros(1) for _ in range(world_size)]\n"
                  "dist.all_gather(out, torch.tensor([float(rank)]))\n"
                  "assert [o.item() for o in out] == list(range(world_size))",
    "gather": "out = [torch.zeros(1) for _ in range(world_size)] if rank == 0 else None\n"
              "dist.gather(torch.tensor([float(rank)]), out, dst=0)\n"
              "assert rank != 0 or [o.item() for o in out] == list(range(world_size))",
    "scatter": "t = torch.zeros(1)\n"
               "chunks = [torch.tensor([float(i)]) for i in range(world_size)] if rank == 0 else None\n"
               "dist.scatter(t, chunks, src=0)\nassert t.item() == rank",
    "reduce": "t = torch.tensor([1.0]); dist.reduce(t, dst=0)\nassert rank != 0 or t.item() == world_size",
    "barrier": "dist.barrier()",
    "send_recv_ring": "t = torch.tensor([float(rank)]); r = torch.zeros(1)\n"
                      "dist.send(t, (rank + 1) % world_size) if rank % 2 == 0 else None\n"
                      "dist.recv(r, (rank - 1) % world_size)\n"
                      "dist.send(t, (rank + 1) % world_size) if rank % 2 == 1 else None\n"
                      "assert r.item() == (rank - 1) % world_size",
    "isend_irecv": "peer = rank ^ 1; r = torch.zeros(1)\n"
                   "reqs = [dist.isend(torch.tensor([float(rank)]), peer), dist.irecv(r, peer)]\n"
                   "[q.wait() for q in reqs]\nassert r.item() == peer",
    "all_gather_object": "out = [None] * world_size; dist.all_gather_object(out, {'rank': rank})\n"
                         "assert [o['rank'] for o in out] == list(range(world_size))",
    "broadcast_object_list": "objs = [('hello', rank)]; dist.broadcast_object_list(objs, src=2)\n"
                             "assert objs[0] == ('hello', 2)",
    "new_group_even": "g = dist.new_group([0, 2]); t = torch.ones(1)\n"
                      "dist.all_reduce(t, group=g) if rank in (0, 2) else None\n"
                      "assert t.item() == (2 if rank in (0, 2) else 1)",
    "async_all_reduce": "t = torch.ones(3); w = dist.all_reduce(t, async_op=True); w.wait()\n"
                        "assert t.tolist() == [float(world_size)] * 3",
    "reduce_max_to_last": "t = torch.tensor([float(rank)])\n"
                          "dist.reduce(t, dst=world_size - 1, op=dist.ReduceOp.MAX)\n"
                          "assert rank != world_size - 1 or t.item() == world_size - 1",
}


def ours_file():
    parts = ["import pytest, torch, torch.distributed as dist\n"]
    for name, body in BODIES.items():
        parts.append("\n@pytest.mark.distributed(world_size=%d)\ndef test_%s(rank, world_size):\n%s\n"
                     % (WORLD, name, textwrap.indent(body, "    ")))
    return "".join(parts)


def mptc_file(start):
    parts = [textwrap.dedent("""\
        import torch, torch.distributed as dist
        from torch.testing._internal.common_distributed import MultiProcessTestCase


        class DistributedTests(MultiProcessTestCase):
            @property
            def world_size(self):
                return %d

            def setUp(self):
                super().setUp()
                %s

            def _init(self):
                store = dist.FileStore(self.file_name, self.world_size)
                dist.init_process_group("gloo", store=store, rank=self.rank,
                                        world_size=self.world_size)
        """ % (WORLD, start))]
    for name, body in BODIES.items():
        parts.append("\n    def test_%s(self):\n        rank, world_size = self.rank, self.world_size\n"
                     "        self._init()\n%s\n        dist.destroy_process_group()\n"
                     % (name, textwrap.indent(body, "        ")))
    return "".join(parts)


def write_files(folder):
    with open(os.path.join(folder, "test_ours.py"), "w") as f:
        f.write(ours_file())
    starts = {"spawn": "self._spawn_processes()",
              "fork": 'self._start_processes(torch.multiprocessing.get_context("fork").Process)'}
    for name, start in starts.items():
        with open(os.path.join(folder, "test_mptc%s.py" % name), "w") as f:
            f.write(mptc_file(start))
    stub = os.path.join(folder, "stub", "expecttest")
    os.makedirs(stub)
    with open(os.path.join(stub, "__init__.py"), "w") as f:
        f.write("import unittest\nACCEPT = False\nTestCase = unittest.TestCase\n")


def run(folder, argv, env):
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + argv,
                          cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    elapsed = time.monotonic() - start
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or "20 passed" not in last:
        sys.exit("pytest_plugin_benchmark: %s failed (exit %d):\n%s\n%s"
                 % (" ".join(argv), done.returncode, done.stdout[-3000:], done.stderr[-2000:]))
    return elapsed


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ddp-sim", default=os.path.join(here, "build", "bin", "ddp-sim"))
    args = parser.parse_args()
    if not os.access(args.ddp_sim, os.X_OK):
        sys.exit("pytest_plugin_benchmark: no ddp-sim at %s (build it, or give --ddp-sim)"
                 % args.ddp_sim)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    base["DDPH_SIM"] = os.path.abspath(args.ddp_sim)
    sides = {
        "ddph_pytest, audited": (["-p", "ddph_pytest.plugin", "test_ours.py"],
                                 os.path.join(here, "python")),
        "ddph_pytest, --ddph-no-audit": (["-p", "ddph_pytest.plugin", "--ddph-no-audit",
                                          "test_ours.py"], os.path.join(here, "python")),
        "MultiProcessTestCase, spawn": (["test_mptcspawn.py"], "stub"),
        "MultiProcessTestCase, fork": (["test_mptcfork.py"], "stub"),
    }
    times = {name: [] for name in sides}
    folder = tempfile.mkdtemp(prefix="ddph-bench-")
    try:
        write_files(folder)
        for repeat in range(args.repeats):
            for name, (argv, path) in sides.items():
                env = dict(base, PYTHONPATH=path if os.path.isabs(path)
                           else os.path.join(folder, path))
                times[name].append(run(folder, argv, env))
                print("repeat %d: %-30s %7.2f s" % (repeat + 1, name, times[name][-1]), flush=True)
    finally:
        shutil.rmtree(folder)
    ours = statistics.median(times["ddph_pytest, audited"])
    print("\n%d tests at W = %d, whole pytest run, median of %d (min-max):"
          % (len(BODIES), WORLD, args.repeats))
    for name, values in times.items():
        median = statistics.median(values)
        print("  %-30s %7.2f s (%.2f-%.2f)  %5.2fx the audited plugin's time"
              % (name, median, min(values), max(values), median / ours))


if __name__ == "__main__":
    main()
