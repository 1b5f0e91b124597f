"""Bug: a hand-written sampler whose ranks overlap.

ShardSampler gives rank r the indices r*L .. r*L+L+4 (modulo N), L = N // W: five samples too many
per rank, shared with the next rank (the last rank wraps around to rank 0's first samples). It has
a set_epoch (it shuffles its shard per epoch) and is iterated fully. Exits 0.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class ShardSampler(Sampler):
    def __init__(self, dataset, rank, world_size, seed=0):
        self.n = len(dataset)
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.epoch = 0
        length = self.n // world_size
        self.indices = [i % self.n for i in range(rank * length, rank * length + length + 5)]

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.indices), generator=g).tolist()
        return iter([self.indices[i] for i in order])

    def __len__(self):
        return len(self.indices)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(600, 20, generator=g)
    dataset = TensorDataset(x, (x[:, :5].sum(1) > 0).long())
    sampler = ShardSampler(dataset, rank, world)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
        if rank == 0:
            print(f"epoch {epoch}: loss {total / len(loader):.6f}", flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
