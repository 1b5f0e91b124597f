"""ddph_launch/process_hash.py: which scripts depend on each process's own string hashing (their
ranks are then exec'd, not forked: docs/ddp-sim.md, "How ranks start"), read from the source."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ddph_launch"))
import process_hash  # noqa: E402


class ProcessHashTest(unittest.TestCase):
    def depends(self, source, environ=None):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "train.py")
            with open(path, "w") as f:
                f.write(source)
            return process_hash.hash_dependence(path, {} if environ is None else environ)

    def test_a_split_by_hash_is_named_with_its_line(self):
        src = "import os\n\ndef shard(key, world):\n    return hash(key) % world\n"
        self.assertEqual(self.depends(src), "train.py:4 calls hash()")

    def test_a_set_turned_into_an_order_is_named(self):
        self.assertEqual(self.depends("words = ['a']\nv = {w: i for i, w in enumerate(set(words))}\n"),
                         "train.py:2 orders a set with enumerate()")
        self.assertEqual(self.depends("for w in {'a', 'b'}:\n    print(w)\n"),
                         "train.py:1 iterates a set")
        self.assertEqual(self.depends("x = [w for w in frozenset('ab')]\n"), "train.py:1 iterates a set")
        self.assertEqual(self.depends("s = ','.join(set('ab'))\n"), "train.py:1 joins a set")

    def test_orders_that_do_not_depend_on_the_seed_are_not(self):
        for src in ("v = sorted(set('ab'))\n", "n = len(set([1, 2]))\n", "ok = 3 in {1, 2, 3}\n",
                    "h = obj.hash(3)\n", "def hash(x):\n    return 1\n", "x = hash\n"):
            self.assertIsNone(self.depends(src), src)

    def test_a_fixed_hash_seed_makes_every_process_hash_alike(self):
        src = "print(hash('a'))\n"
        self.assertIsNone(self.depends(src, {"PYTHONHASHSEED": "0"}))
        self.assertEqual(self.depends(src, {"PYTHONHASHSEED": "random"}), "train.py:1 calls hash()")

    def test_a_script_it_cannot_read_or_parse_is_not(self):
        self.assertIsNone(process_hash.hash_dependence("/nonexistent/train.py", {}))
        self.assertIsNone(self.depends("def (:\n"))


if __name__ == "__main__":
    unittest.main()
