"""The framework a program runs under, and where its collectives come from (docs/trace-format.md:
``framework``, ``step``, ``logged``, ``coll``'s ``at`` and ``via``), recorded for a program in Lightning's shape
over a stand-in package (tests/programs/stub_lightning: Lightning itself is not here)."""
import os
import tempfile
import unittest

from tests import support


class FrameworkTest(unittest.TestCase):
    def test_lightning_shape(self):
        with tempfile.TemporaryDirectory() as d:
            results = support.run_ranks(os.path.join(support.PROGRAMS, "lightning_shape.py"),
                                        world_size=2, trace_dir=d)
            for code, out, err in results:
                self.assertEqual(code, 0, err)
            lines = list(support.read_trace(os.path.join(d, "rank-0.jsonl")))
        frameworks = [e for e in lines if e["ev"] == "framework"]
        self.assertEqual(frameworks, [dict(frameworks[0], name="lightning", version="0.0-stub")])
        self.assertEqual(len(frameworks), 1)
        self.assertEqual([e["optimizer"] for e in lines if e["ev"] == "step"], ["SGD", "SGD"])
        # The rate each step used (the first parameter group's).
        self.assertEqual([e["lr"] for e in lines if e["ev"] == "step"], [0.1, 0.1])
        colls = [e for e in lines if e["ev"] == "coll"]
        gathers = [e for e in colls if e["op"] == "all_gather"]
        barriers = [e for e in colls if e["op"] == "barrier"]
        self.assertEqual(len(gathers), 2)
        for e in gathers:  # the program's own line, through the framework
            self.assertEqual((e["at"], e["via"]), ("lightning_shape.py:26 in training_epoch",
                                                   "lightning"))
        for e in barriers:  # the framework's own: placed at the program's fit()
            self.assertEqual((e["at"], e["via"]), ("lightning_shape.py:32 in main", "lightning"))
        # The logged value's reduction runs at the epoch's end, placed at fit(); the program's own
        # line that logged it is the `logged` line, written once for its two epochs.
        reduces = [e for e in colls if e["op"] == "all_reduce"]
        self.assertEqual([(e["at"], e["via"]) for e in reduces],
                         [("lightning_shape.py:32 in main", "lightning")] * 2)
        # The sampler the framework built under the data is told from the program's own.
        samplers = [e for e in lines if e["ev"] == "sampler"]
        self.assertEqual([e.get("via") for e in samplers], [None, "lightning"])
        logged = [e for e in lines if e["ev"] == "logged"]
        self.assertEqual([(e["name"], e["at"]) for e in logged],
                         [("loss", "lightning_shape.py:27 in training_epoch")])

    def test_a_plain_call_has_no_via(self):
        with tempfile.TemporaryDirectory() as d:
            results = support.run_ranks(os.path.join(support.PROGRAMS, "ddp_train.py"),
                                        ["--hook", "user"], world_size=2, trace_dir=d)
            for code, out, err in results:
                self.assertEqual(code, 0, err)
            lines = list(support.read_trace(os.path.join(d, "rank-0.jsonl")))
        users = [e for e in lines if e["ev"] == "coll" and e.get("src") == "user"]
        for e in users:
            self.assertNotIn("via", e)
            self.assertTrue(e.get("at", "").startswith("ddp_train.py:"), e)
        self.assertNotIn("framework", {e["ev"] for e in lines})


if __name__ == "__main__":
    unittest.main()
