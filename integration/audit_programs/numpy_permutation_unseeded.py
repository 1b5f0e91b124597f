"""A block sampler that shuffles with np.random.permutation and takes its rank's block; the
program seeds torch and random, never numpy, whose global generator each process seeds from the
operating system: every rank draws its own permutation, the blocks overlap and leave samples out.
--seeded: the healthy twin (np.random.seed(0) on every rank, with the epoch)."""
import argparse
import random

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class BlockSampler(Sampler):
    def __init__(self, n, rank, world, seeded):
        self.n, self.rank, self.world, self.seeded, self.epoch = n, rank, world, seeded, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        if self.seeded:
            np.random.seed(self.epoch)
        order = np.random.permutation(self.n).tolist()
        block = self.n // self.world
        return iter(order[self.rank * block:(self.rank + 1) * block])

    def __len__(self):
        return self.n // self.world


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeded", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    random.seed(0)
    x = torch.randn(320, 6)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = BlockSampler(len(data), dist.get_rank(), dist.get_world_size(), args.seeded)
    loader = DataLoader(data, batch_size=20, sampler=sampler)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
