"""The program's seeds (``seed`` lines, ddph_audit/seeds.py) and the orders drawn from the global
generators (``global_draw`` lines, NOTE [An order drawn from the global generators])."""
import os
import tempfile
import unittest

from tests import support


class SeedsTest(unittest.TestCase):
    def test_seeds_and_global_draws_are_recorded(self):
        with tempfile.TemporaryDirectory() as d:
            results = support.run_ranks(os.path.join(support.PROGRAMS, "seeded_orders.py"),
                                        world_size=2, trace_dir=d)
            for code, out, err in results:
                self.assertEqual(code, 0, err)
            lines = list(support.read_trace(os.path.join(d, "rank-0.jsonl")))
        seeds = [(e["generator"], e.get("value"), e.get("at")) for e in lines if e["ev"] == "seed"]
        self.assertEqual(seeds, [("torch", 11, "seeded_orders.py:30 in main"),
                                 ("random", 12, "seeded_orders.py:31 in main"),
                                 ("numpy", 13, "seeded_orders.py:32 in main")])
        draws = [e for e in lines if e["ev"] == "global_draw"]
        # Only the sampler that shuffles with torch.randperm and no generator of its own.
        self.assertEqual([(e["loader"], e["generators"]) for e in draws], [(0, ["torch"])])


if __name__ == "__main__":
    unittest.main()
