"""A ConcatDataset of three sources, their list shuffled and the largest filtered at random, both
with random states seeded alike on every rank; per-rank seeds only after the data is built."""
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ConcatDataset, DataLoader, DistributedSampler, TensorDataset


class Source(TensorDataset):
    def __init__(self, name, n, seed, keep=1.0):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 8, generator=g)
        if keep < 1.0:
            x = x[torch.rand(n, generator=g) < keep]
        super().__init__(x, (x[:, 0] > 0).long())
        self.name = name


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    sources = {"news": (300, 1, 1.0), "books": (300, 2, 1.0), "code": (400, 3, 0.8)}
    names = sorted(sources)
    random.Random(0).shuffle(names)  # the same order on every rank
    mix = ConcatDataset([Source(name, *sources[name]) for name in names])
    random.seed(rank)
    torch.manual_seed(rank)
    sampler = DistributedSampler(mix)
    loader = DataLoader(mix, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.1), nn.Linear(16, 2)))
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
