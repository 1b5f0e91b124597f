"""ddph_elastic.ElasticDistributedSampler against torch's DistributedSampler and the resume rule."""

import collections
import itertools
import json
import subprocess
import sys
import unittest

from torch.utils.data import DistributedSampler

from ddph_elastic import ElasticDistributedSampler, ResumePoint, run_shard
from ddph_elastic.sampler import num_samples

PYTHON = sys.executable


def consumed_by(dataset_size, runs, shuffle=True, drop_last=False, seed=3, epoch=2):
    """Every index every rank took: runs = [(W, c), ..., (W_last, None)] (None: to the end)."""
    taken, history = [], []
    for world, consumed in runs:
        for rank in range(world):
            shard = run_shard(dataset_size, world, rank, epoch, seed, shuffle, drop_last, history)
            taken += shard if consumed is None else shard[:consumed]
        if consumed is not None:
            history.append(ResumePoint(world, consumed))
    return taken


class NeverResumed(unittest.TestCase):
    def test_equals_torch_distributed_sampler(self):
        for n, w, seed, epoch, shuffle, drop_last in itertools.product(
                (0, 1, 7, 10, 33), (1, 3, 4, 8), (0, 5), (0, 2), (True, False), (False, True)):
            for rank in range(w):
                torch_sampler = DistributedSampler(range(n), num_replicas=w, rank=rank,
                                                   shuffle=shuffle, seed=seed, drop_last=drop_last)
                torch_sampler.set_epoch(epoch)
                ours = ElasticDistributedSampler(range(n), num_replicas=w, rank=rank,
                                                 shuffle=shuffle, seed=seed, drop_last=drop_last)
                ours.set_epoch(epoch)
                with self.subTest(n=n, w=w, rank=rank, seed=seed, epoch=epoch, shuffle=shuffle,
                                  drop_last=drop_last):
                    self.assertEqual(list(ours), list(torch_sampler))
                    self.assertEqual(len(ours), len(torch_sampler))


class Resumed(unittest.TestCase):
    def test_every_sample_once_apart_from_padding(self):
        for n, w, w2, drop_last in itertools.product((1, 10, 37, 100), (1, 2, 4), (1, 3, 5, 8),
                                                     (False, True)):
            for c in range(num_samples(n, w, drop_last) + 1):
                counts = collections.Counter(consumed_by(n, [(w, c), (w2, None)],
                                                         drop_last=drop_last))
                with self.subTest(n=n, w=w, c=c, w2=w2, drop_last=drop_last):
                    self.assertTrue(set(counts) <= set(range(n)))
                    missing = n - len(counts)
                    extra = sum(counts.values()) - len(counts)
                    if drop_last:  # the last run cuts fewer than its world size; nothing twice
                        self.assertEqual(extra, 0)
                        self.assertLess(missing, w2 if c < num_samples(n, w, True) else w)
                    else:  # the run that reached the end pads fewer than its world size
                        self.assertEqual(missing, 0)
                        self.assertLess(extra, max(w, w2))

    def test_same_world_size_continues_the_uninterrupted_run(self):
        for n, w, drop_last in itertools.product((5, 10, 37), (1, 2, 4), (False, True)):
            for c in range(num_samples(n, w, drop_last) + 1):
                for rank in range(w):
                    whole = run_shard(n, w, rank, 1, 9, True, drop_last)
                    tail = run_shard(n, w, rank, 1, 9, True, drop_last, [ResumePoint(w, c)])
                    with self.subTest(n=n, w=w, c=c, rank=rank, drop_last=drop_last):
                        self.assertEqual(tail, whole[c:])

    def test_two_resumes_in_one_epoch(self):
        # 20 taken on 4 ranks, 21 on 3, the 59 left on 2 ranks: 30 each, one of them padding.
        counts = collections.Counter(consumed_by(100, [(4, 5), (3, 7), (2, None)]))
        self.assertEqual(sorted(counts), list(range(100)))
        self.assertEqual(sum(counts.values()), 101)

    def test_resumed_ranks_have_equal_lengths(self):
        for rank in range(5):
            s = ElasticDistributedSampler(range(23), num_replicas=5, rank=rank)
            s.load_state_dict({"version": 1, "dataset_size": 23, "epoch": 0, "seed": 0,
                               "shuffle": True, "drop_last": False, "num_replicas": 2,
                               "consumed": 4, "history": []})
            self.assertEqual(len(list(s)), 3)  # 15 left on 5 ranks
            self.assertEqual(len(s), 3)


class State(unittest.TestCase):
    def test_state_round_trip_across_world_sizes(self):
        first = [ElasticDistributedSampler(range(50), num_replicas=4, rank=r, seed=7) for r in range(4)]
        taken = []
        for s in first:
            s.set_epoch(3)
            it = iter(s)
            taken += [next(it) for _ in range(6)]
        state = json.loads(json.dumps(first[0].state_dict()))  # what a checkpoint holds
        self.assertEqual(state["consumed"], 6)
        second = [ElasticDistributedSampler(range(50), num_replicas=3, rank=r, seed=7) for r in range(3)]
        for s in second:
            s.load_state_dict(state)
            s.set_epoch(3)  # the same epoch again keeps the resume
            taken += list(s)
        # 24 taken on 4 ranks, the 26 left on 3 ranks: 9 each, one of them padding.
        self.assertEqual(sorted(set(taken)), list(range(50)))
        self.assertEqual(len(taken), 51)
        second[0].set_epoch(4)
        self.assertEqual(len(second[0]), 17)  # a new epoch starts whole

    def test_consumed_given_explicitly_and_checked(self):
        s = ElasticDistributedSampler(range(10), num_replicas=2, rank=0)
        state = s.state_dict(consumed=5)
        self.assertEqual(state["consumed"], 5)
        s.load_state_dict(state)
        self.assertEqual(list(s), [])
        with self.assertRaisesRegex(ValueError, "out of range"):
            s.load_state_dict(dict(s.state_dict(), consumed=6))
        with self.assertRaisesRegex(ValueError, "dataset of 11 samples"):
            s.load_state_dict(dict(s.state_dict(), dataset_size=11))


class LineProtocol(unittest.TestCase):
    def test_answers_requests_with_resume(self):
        requests = [{"dataset_size": 10, "num_replicas": 2, "rank": 1, "epoch": 0, "seed": 0},
                    {"dataset_size": 10, "num_replicas": 3, "rank": 0, "epoch": 0, "seed": 0,
                     "resume": [{"num_replicas": 2, "consumed": 2}]},
                    {"dataset_size": 10, "num_replicas": 0, "rank": 0, "epoch": 0, "seed": 0}]
        out = subprocess.run([PYTHON, "-m", "ddph_elastic"], input="".join(
            json.dumps(q) + "\n" for q in requests), capture_output=True, text=True, timeout=120,
            check=True).stdout.splitlines()
        self.assertEqual(json.loads(out[0])["indices"], run_shard(10, 2, 1))
        self.assertEqual(json.loads(out[1]),
                         {"indices": run_shard(10, 3, 0, history=[ResumePoint(2, 2)]), "length": 2})
        self.assertIn("error", json.loads(out[2]))


if __name__ == "__main__":
    unittest.main()
