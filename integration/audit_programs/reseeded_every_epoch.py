"""A hand-written sampler that shuffles with torch.randperm (the global generator) and takes its
rank's stride, in a program that re-seeds everything at the top of each epoch "so that a crashed
epoch can be replayed on its own": every epoch draws epoch 0's order again.
--seed-once: the healthy twin (seeded once, before training)."""
import argparse
import math
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class StridedShuffle(Sampler):
    def __init__(self, n, rank, world):
        self.n, self.rank, self.world = n, rank, world
        self.per_rank = math.ceil(n / world)

    def __iter__(self):
        order = torch.randperm(self.n).tolist()
        order += order[: self.per_rank * self.world - self.n]
        return iter(order[self.rank::self.world])

    def __len__(self):
        return self.per_rank


def seed_all(seed):
    random.seed(seed)
    torch.manual_seed(seed)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed-once", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    seed_all(7)
    x = torch.randn(320, 6)
    data = TensorDataset(x, x.sum(1, keepdim=True))
    loader = DataLoader(data, batch_size=16, sampler=StridedShuffle(len(data), rank, world))
    model = DDP(nn.Linear(6, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        if not args.seed_once:
            seed_all(7)  # replayable epochs
        for xb, yb in loader:
            opt.zero_grad()
            F.mse_loss(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
