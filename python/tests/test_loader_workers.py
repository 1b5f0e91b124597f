"""DataLoaders with worker processes (fork, spawn, persistent) under audit: the program's output
is unchanged, only the rank writes a trace, and the recorded indices are the delivered ones."""
import json
import os
import tempfile
import unittest

from ddph_audit import index_codec
from tests import support

SCRIPT = os.path.join(support.PROGRAMS, "loader_workers.py")


class LoaderWorkersTest(unittest.TestCase):
    def test_workers_do_not_write_and_indices_match(self):
        [(bcode, bout, berr)] = support.run_ranks(SCRIPT, world_size=1)
        self.assertEqual(bcode, 0, berr)
        with tempfile.TemporaryDirectory() as d:
            [(code, out, err)] = support.run_ranks(SCRIPT, world_size=1, trace_dir=d)
            self.assertEqual(code, 0, err)
            self.assertEqual(sorted(os.listdir(d)), ["rank-0.jsonl"])
            evs = support.read_trace(os.path.join(d, "rank-0.jsonl"))
        self.assertEqual([e["ev"] for e in evs].count("header"), 1)
        self.assertEqual(evs[-1]["ev"], "end")
        # fork / spawn: a deterministic custom sampler, same output as bare.
        self.assertEqual([l for l in out.splitlines() if not l.startswith("persistent")],
                         [l for l in bout.splitlines() if not l.startswith("persistent")])
        printed = [json.loads(l.split(" ", 1)[1]) for l in out.splitlines()
                   if not l.startswith("persistent")]
        printed += [json.loads(l.split(" ", 2)[2]) for l in out.splitlines()
                    if l.startswith("persistent")]
        batches = [e for e in evs if e["ev"] == "batch"]
        self.assertEqual([index_codec.decode(e["idx"]) for e in batches], printed)
        self.assertEqual([e["size"] for e in batches], [len(p) for p in printed])
        loaders = [e for e in evs if e["ev"] == "loader"]
        self.assertEqual([e["num_workers"] for e in loaders], [2, 2, 2])
        samplers = {e["id"]: e for e in evs if e["ev"] == "sampler"}
        self.assertEqual([samplers[e["sampler"]]["order"] for e in loaders], ["recorded"] * 3)
        ends = [(e["loader"], e["iter"], e["batches"]) for e in evs if e["ev"] == "epoch_end"]
        self.assertEqual(ends, [(0, 0, 7), (1, 0, 7), (2, 0, 5), (2, 1, 5)])


STREAM = os.path.join(support.PROGRAMS, "stream_workers.py")


class StreamWorkersTest(unittest.TestCase):
    """NOTE [A stream whose workers are reseeded alike] (docs/audit.md): forked workers report
    the generators their first batch advanced and their states after worker_init_fn."""

    def test_forked_workers_report_their_generators(self):
        [(bcode, bout, berr)] = support.run_ranks(STREAM, world_size=1)
        self.assertEqual(bcode, 0, berr)
        with tempfile.TemporaryDirectory() as d:
            [(code, out, err)] = support.run_ranks(STREAM, world_size=1, trace_dir=d)
            self.assertEqual(code, 0, err)
            self.assertEqual(sorted(os.listdir(d)), ["rank-0.jsonl"])
            evs = support.read_trace(os.path.join(d, "rank-0.jsonl"))
        # The program sees its own worker_init_fn, and its fixed seeds give the same batches.
        self.assertEqual([l.split(" [")[0] for l in out.splitlines()],
                         [l.split(" [")[0] for l in bout.splitlines()])
        self.assertIn("fork fixed_seed", out.splitlines()[0])
        lines = out.splitlines()
        self.assertEqual(lines[0], lines[1])  # reseeded alike: the same order twice
        self.assertEqual(lines[0], bout.splitlines()[0])
        draws = {(e["loader"], e["iter"]): e for e in evs if e["ev"] == "global_draw"}
        # Forked: loaders 0, 1, 2, each pass; spawned (loader 3): not watched.
        self.assertEqual(sorted(draws), [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)])
        for e in draws.values():
            self.assertEqual(e["generators"], ["numpy"])
            self.assertEqual([s.split()[:2] for s in e["worker_rng"]],
                             [["0", "numpy"], ["1", "numpy"]])
        # Alike in both passes only where worker_init_fn reseeds with a fixed seed.
        self.assertEqual(draws[(0, 0)]["worker_rng"], draws[(0, 1)]["worker_rng"])
        self.assertNotEqual(draws[(1, 0)]["worker_rng"], draws[(1, 1)]["worker_rng"])
        self.assertNotEqual(draws[(2, 0)]["worker_rng"], draws[(2, 1)]["worker_rng"])
        # Written before the pass's end.
        ends = [i for i, e in enumerate(evs) if e["ev"] == "epoch_end" and e["loader"] == 0]
        at = [i for i, e in enumerate(evs) if e["ev"] == "global_draw" and e["loader"] == 0]
        self.assertEqual([a + 1 for a in at], ends)


if __name__ == "__main__":
    unittest.main()
