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


if __name__ == "__main__":
    unittest.main()
