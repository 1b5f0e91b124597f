"""The evidence the audit's likely causes are chosen from (docs/trace-format.md): the epoch a
sampler's order was really drawn with (``draw``), ``replacement``, content fingerprints of
iterable batches (``fp``), ``sync`` under no_sync, where an error was raised, and what tells the
ranks' datasets apart (``dataset_items``, ``dataset_content``, ``dataset_parts``)."""
import os
import sys
import tempfile
import unittest

import torch

from ddph_audit import batch_fingerprint, process_hooks
from tests import support

SCRIPT = os.path.join(support.PROGRAMS, "evidence.py")


class BatchFingerprintTest(unittest.TestCase):
    def test_same_content_same_fingerprint(self):
        a = (torch.arange(12.0).reshape(3, 4), torch.tensor([0, 1, 2]))
        b = (torch.arange(12.0).reshape(3, 4), torch.tensor([0, 1, 2]))
        self.assertEqual(batch_fingerprint.fingerprint(a), batch_fingerprint.fingerprint(b))

    def test_other_content_shape_or_dtype_another_fingerprint(self):
        base = batch_fingerprint.fingerprint([torch.arange(12.0)])
        self.assertNotEqual(base, batch_fingerprint.fingerprint([torch.arange(1.0, 13.0)]))
        self.assertNotEqual(base, batch_fingerprint.fingerprint([torch.arange(12.0).reshape(3, 4)]))
        self.assertNotEqual(base, batch_fingerprint.fingerprint([torch.arange(12.0).double()]))

    def test_large_tensors_are_sampled_and_odd_dtypes_work(self):
        big = torch.zeros(4_000_000)
        other = big.clone()
        other[0] = 1.0  # an element the sample hashes (position 0)
        self.assertNotEqual(batch_fingerprint.fingerprint(big), batch_fingerprint.fingerprint(other))
        self.assertTrue(batch_fingerprint.fingerprint({"x": torch.ones(3, dtype=torch.bfloat16),
                                                       "name": "a", "n": 3}))

    def test_each_sample_of_a_collated_batch_has_its_own_fingerprint(self):
        x = torch.arange(24.0).reshape(4, 6)
        y = torch.tensor([0, 1, 0, 1])
        rows = batch_fingerprint.sample_fingerprints((x, y))
        self.assertEqual(len(rows), 4)
        self.assertEqual(len(set(rows)), 4)
        # The same samples in another order, in another batch: the same fingerprints.
        swapped = batch_fingerprint.sample_fingerprints((x[[2, 0, 3, 1]], y[[2, 0, 3, 1]]))
        self.assertEqual(swapped, [rows[2], rows[0], rows[3], rows[1]])
        self.assertEqual(batch_fingerprint.sample_fingerprints((x[:2], y[:2])), rows[:2])
        # Not a collated batch: leaves of other lengths, or no tensor at all.
        self.assertIsNone(batch_fingerprint.sample_fingerprints((x, torch.tensor([0, 1]))))
        self.assertIsNone(batch_fingerprint.sample_fingerprints(("a", 3)))
        self.assertTrue(batch_fingerprint.sample_fingerprints(torch.ones(2, 3, dtype=torch.bfloat16)))


class WhereRaisedTest(unittest.TestCase):
    def test_innermost_frame_of_the_program_itself(self):
        def load(i):
            raise ValueError("corrupt sample %d" % i)
        try:
            load(28)
        except ValueError:
            tb = sys.exc_info()[2]
        where = process_hooks.innermost_program_frame(tb, "corrupt sample 28")
        self.assertRegex(where, r"^test_evidence\.py:\d+ in load$")

    def test_a_workers_wrapped_traceback_gives_its_frame(self):
        message = ('Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most '
                   'recent call last):\n  File "/usr/lib/python3/dist-packages/torch/utils/data/'
                   '_utils/worker.py", line 302, in _worker_loop\n    data = fetcher.fetch(index)\n'
                   '  File "/home/u/train.py", line 28, in __getitem__\n    raise ValueError(f"'
                   'corrupt sample {i}")\nValueError: corrupt sample 28\n')
        self.assertEqual(process_hooks.innermost_program_frame(None, message),
                         "train.py:28 in __getitem__")


class EvidenceInTheTraceTest(unittest.TestCase):
    def test_each_piece_of_evidence_is_written(self):
        with tempfile.TemporaryDirectory() as d:
            [(code, out, err)] = support.run_ranks(SCRIPT, world_size=1, trace_dir=d)
            self.assertEqual(code, 1, err)
            evs = support.read_trace(os.path.join(d, "rank-0.jsonl"))
        # Without workers the order is drawn at the first next(): the late set_epoch is in time.
        draws = [(e["loader"], e["iter"], e["sampler_epoch"]) for e in evs if e["ev"] == "draw"]
        self.assertEqual(draws, [(0, 0, 10), (0, 1, 11)])
        epochs = [(e["loader"], e["iter"], e.get("sampler_epoch")) for e in evs if e["ev"] == "epoch"]
        self.assertEqual(epochs[:4], [(0, 0, 0), (0, 1, 10), (1, 0, 0), (1, 1, 10)])
        samplers = [e for e in evs if e["ev"] == "sampler"]
        self.assertTrue(samplers[2]["class"].endswith("WeightedRandomSampler"))
        self.assertIs(samplers[2]["replacement"], True)
        stream = [e for e in evs if e["ev"] == "batch" and e["loader"] == 3]
        self.assertEqual(len(stream), 2)
        self.assertTrue(all(len(e["fp"]) == 16 for e in stream))
        self.assertNotEqual(stream[0]["fp"], stream[1]["fp"])
        self.assertEqual([e["sync"] for e in evs if e["ev"] == "forward"], [False, True])
        # What tells the ranks' datasets apart: a TensorDataset's items, a ConcatDataset's parts.
        loaders = [e for e in evs if e["ev"] == "loader"]
        self.assertEqual(len(loaders[0]["dataset_items"]), 16)
        self.assertEqual(len(loaders[0]["dataset_content"]), 16)
        self.assertNotIn("dataset_items", loaders[3])  # an iterable dataset: read by its batches
        parts = loaders[4]["dataset_parts"]
        self.assertEqual([(p["dataset"], p.get("name"), p["len"]) for p in parts],
                         [("TensorDataset", "news", 6), ("TensorDataset", None, 4)])
        self.assertNotEqual(parts[0]["items"], parts[1]["items"])
        [error] = [e for e in evs if e["ev"] == "error"]
        self.assertEqual(error["message"], "the end of the evidence")
        self.assertRegex(error["where"], r"^evidence\.py:\d+ in main$")


if __name__ == "__main__":
    unittest.main()
