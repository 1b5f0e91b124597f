"""The elastic sampler and the one definition of its order (docs/elastic-resume.md).

An epoch's order is PyTorch's: torch.randperm(N) from a generator seeded seed + epoch, or 0..N-1
without shuffle. A *run* over part of it (the whole epoch at first) pads and strides as
DistributedSampler does on its world size W: the run's order, padded by tiling the head of the
epoch's order to a multiple of W (or cut to one with drop_last), rank r taking positions r, r+W, ...
After every rank of the run consumed c samples, the first c*W positions are done and the next run
is the run's (unpadded) order from position c*W on. So a run on W' = W continues the uninterrupted
run index for index, padding included.
"""

import math
import operator
from typing import Dict, List, NamedTuple, Optional, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import Sampler


class ResumePoint(NamedTuple):
    """An earlier run of this epoch: its world size and how many samples each of its ranks took."""

    num_replicas: int
    consumed: int


def epoch_order(dataset_size: int, shuffle: bool, seed: int, epoch: int) -> List[int]:
    """The epoch's global order, as DistributedSampler draws it."""
    if not shuffle:
        return list(range(dataset_size))
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    return torch.randperm(dataset_size, generator=g).tolist()


def num_samples(run_length: int, num_replicas: int, drop_last: bool) -> int:
    """What each rank of a run over `run_length` positions yields (DistributedSampler's formula)."""
    if drop_last:
        return run_length // num_replicas
    return math.ceil(run_length / num_replicas)


def run_start(dataset_size: int, history: Sequence[ResumePoint], drop_last: bool) -> int:
    """Where the run after `history` (oldest first) starts in the epoch's order: each run is the
    previous one's order from position consumed * num_replicas on. Raises ValueError for a point
    its run could not have reached."""
    start = 0
    for k, point in enumerate(history, 1):
        if point.num_replicas < 1:
            raise ValueError(f"resume point {k}: num_replicas must be positive, got {point.num_replicas}")
        length = dataset_size - start
        limit = num_samples(length, point.num_replicas, drop_last)
        if point.consumed < 0 or point.consumed > limit:
            raise ValueError(f"resume point {k}: a run of {length} samples on {point.num_replicas} "
                             f"ranks yields {limit} a rank; consumed {point.consumed} is out of range")
        start = min(dataset_size, start + point.consumed * point.num_replicas)
    return start


def shard(order: List[int], start: int, num_replicas: int, rank: int,
          drop_last: bool) -> List[int]:
    """Rank `rank`'s part of the run that starts at position `start` of the epoch's `order`: the
    positions rank, rank + W, ... of the run, padded with the order's head (tiled) or cut."""
    n = len(order)
    length = n - start
    total = num_samples(length, num_replicas, drop_last) * num_replicas
    # One slice for the positions within the run, as DistributedSampler takes its part ...
    taken = order[start + rank:start + min(total, length):num_replicas]
    # ... then this rank's padding positions (fewer than W in all, so at most one a rank).
    for p in range(rank + len(taken) * num_replicas, total, num_replicas):
        taken.append(order[(p - length) % n])
    return taken


def run_shard(dataset_size: int, num_replicas: int, rank: int, epoch: int = 0, seed: int = 0,
              shuffle: bool = True, drop_last: bool = False,
              history: Sequence[ResumePoint] = ()) -> List[int]:
    """What `rank` of `num_replicas` yields in the run after `history` of this epoch."""
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ValueError(f"invalid rank {rank} for num_replicas {num_replicas}")
    order = epoch_order(dataset_size, shuffle, seed, epoch)
    return shard(order, run_start(dataset_size, history, drop_last), num_replicas, rank, drop_last)


class ElasticDistributedSampler(Sampler):
    """A drop-in for torch.utils.data.DistributedSampler whose state survives a change of world size.

    state_dict()/load_state_dict() in the StatefulDataLoader manner. The state records the epoch,
    the seed, how many samples each rank consumed in the current run, its world size, and the
    earlier runs of this epoch. Loaded on any world size, the sampler yields the rest of the epoch,
    each remaining sample once (apart from padding to equal lengths).
    """

    def __init__(self, dataset, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.history: List[ResumePoint] = []
        self._shard: List[int] = []
        self._iterator = iter(self._shard)  # the last iterator handed out

    def __iter__(self):
        n = len(self.dataset)
        order = epoch_order(n, self.shuffle, self.seed, self.epoch)
        self._shard = shard(order, run_start(n, self.history, self.drop_last), self.num_replicas,
                            self.rank, self.drop_last)
        # A plain list iterator, as DistributedSampler returns: nothing added per index. What it
        # has handed out is read back from its length hint.
        self._iterator = iter(self._shard)
        return self._iterator

    @property
    def yielded(self) -> int:
        """Indices handed out by the last iterator."""
        return len(self._shard) - operator.length_hint(self._iterator)

    def __len__(self) -> int:
        start = run_start(len(self.dataset), self.history, self.drop_last)
        return num_samples(len(self.dataset) - start, self.num_replicas, self.drop_last)

    def set_epoch(self, epoch: int) -> None:
        """As DistributedSampler's; a new epoch forgets the earlier runs of the last one."""
        if epoch != self.epoch:
            self.history = []
        self.epoch = epoch

    def state_dict(self, consumed: Optional[int] = None) -> Dict:
        """The state to checkpoint. `consumed`: samples each rank trained on in this run (steps
        times batch size); by default what the iterator has yielded, which a DataLoader that
        prefetches runs ahead of."""
        return {
            "version": 1,
            "dataset_size": len(self.dataset),
            "epoch": self.epoch,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
            "num_replicas": self.num_replicas,
            "consumed": self.yielded if consumed is None else int(consumed),
            "history": [list(p) for p in self.history],
        }

    def load_state_dict(self, state: Dict) -> None:
        """Resumes the checkpointed epoch on this sampler's world size (any)."""
        if state.get("version") != 1:
            raise ValueError(f"unknown elastic sampler state version {state.get('version')!r}")
        if state["dataset_size"] != len(self.dataset):
            raise ValueError(f"the checkpoint is of a dataset of {state['dataset_size']} samples, "
                             f"this one has {len(self.dataset)}")
        if (state["seed"], state["shuffle"], state["drop_last"]) != (self.seed, self.shuffle, self.drop_last):
            raise ValueError("the checkpoint's seed, shuffle or drop_last differ from this sampler's")
        self.epoch = state["epoch"]
        history = [ResumePoint(*p) for p in state["history"]]
        history.append(ResumePoint(state["num_replicas"], state["consumed"]))
        run_start(len(self.dataset), history, self.drop_last)  # validates the consumed counts
        self.history = history
        self._shard = []
        self._iterator = iter(self._shard)
