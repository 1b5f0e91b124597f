"""A real DDP training run (gloo, 127.0.0.1), bare and audited: same stdout, same exit codes,
bit-identical final parameters; and the audited run's traces are well formed."""
import os
import tempfile
import unittest

from tests import support

SCRIPT = os.path.join(support.PROGRAMS, "ddp_train.py")


class BehaviourUnchangedTest(unittest.TestCase):
    def compare(self, world_size, mode):
        bare = support.run_ranks(SCRIPT, world_size=world_size)
        for code, out, err in bare:
            self.assertEqual(code, 0, err)
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "trace")
            audited = support.run_ranks(SCRIPT, world_size=world_size, trace_dir=trace, mode=mode)
            for (code, out, err), (bcode, bout, _) in zip(audited, bare):
                self.assertEqual(code, bcode, err)
                self.assertEqual(out, bout)  # losses and the final parameters' hash
                self.assertNotIn("ddph_audit", err)
            self.assertEqual(sorted(os.listdir(trace)),
                             ["rank-%d.jsonl" % r for r in range(world_size)])
            for r in range(world_size):
                self.check_trace(support.read_trace(os.path.join(trace, "rank-%d.jsonl" % r)),
                                 r, world_size)

    def check_trace(self, evs, rank, world_size):
        self.assertEqual(evs[0]["ev"], "header")
        self.assertEqual((evs[0]["rank"], evs[0]["world_size"], evs[0]["version"]),
                         (rank, world_size, 1))
        self.assertEqual(evs[0]["run_id"], "test")
        self.assertEqual(evs[-1], dict(evs[-1], ev="end", code=0))
        kinds = [e["ev"] for e in evs]
        for kind in ("sampler", "loader", "epoch", "batch", "epoch_end", "ddp", "forward",
                     "set_epoch", "params"):
            self.assertIn(kind, kinds)
        colls = [e for e in evs if e["ev"] == "coll"]
        done = {(e["group"], e["seq"]) for e in evs if e["ev"] == "coll_done"}
        self.assertEqual({(e["group"], e["seq"]) for e in colls}, done)
        self.assertEqual([e["seq"] for e in colls], list(range(len(colls))))
        ddp = [e for e in colls if e["src"] == "ddp"]
        self.assertGreater(len({e["bucket"] for e in ddp}), 1)  # several buckets
        user = [e for e in colls if e["src"] == "user"]
        self.assertEqual(len(user), 2)  # the by-name `from torch.distributed import all_reduce`
        self.assertEqual(user[0]["op"], "all_reduce")
        forwards = [e for e in evs if e["ev"] == "forward"]
        self.assertEqual(max(e["backward"] for e in ddp) + 1, len(forwards))

    def test_two_ranks_sitecustomize(self):
        self.compare(2, "site")

    def test_three_ranks_python_m(self):
        # W=3: 1/W is not exact in binary; the recording hook must still match the reducer.
        self.compare(3, "m")


if __name__ == "__main__":
    unittest.main()
