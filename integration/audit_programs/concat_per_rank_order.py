"""Bug: a ConcatDataset whose list of sources each rank shuffles with its own seed.

The program mixes three sources into one ConcatDataset and shuffles the list of sources first, "so
that no source always comes first", after seeding Python's random module with the rank (for its
per-rank augmentation). Every rank concatenates the same sources in another order: index i names
another sample on each rank, and DistributedSampler's shards overlap and leave samples out,
however well it splits the indices. Exits 0.
"""
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ConcatDataset, DataLoader, DistributedSampler, TensorDataset


class Source(TensorDataset):
    """One source of the mix: n samples of 8 features, made from the source's own seed."""

    def __init__(self, name, n, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 8, generator=g)
        super().__init__(x, (x[:, 0] > 0).long())
        self.name = name


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    random.seed(rank)  # per-rank augmentation
    torch.manual_seed(0)
    sources = {"news": (300, 1), "books": (300, 2), "code": (400, 3)}  # samples, seed
    names = list(sources)
    random.shuffle(names)  # no source always first
    mix = ConcatDataset([Source(name, *sources[name]) for name in names])
    sampler = DistributedSampler(mix)
    loader = DataLoader(mix, batch_size=32, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            if random.random() < 0.5:
                x = x + 0.01 * torch.randn_like(x)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
