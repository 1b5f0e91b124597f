"""Healthy: a hand-written distributed weighted sampler that draws with replacement.

Every epoch, one weighted draw of total_size indices with replacement (torch.multinomial, a
generator seeded with seed + epoch, the same on every rank), and each rank takes every
world_size-th index. Such a sampler never promised to visit every sample: the ranks' draws
differ, and each epoch draws anew.
"""
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class DistributedWeightedSampler(Sampler):
    def __init__(self, weights, num_replicas, rank, seed=0):
        self.weights = torch.as_tensor(weights, dtype=torch.double)
        self.num_replicas, self.rank, self.seed, self.epoch = num_replicas, rank, seed, 0
        self.num_samples = math.ceil(len(self.weights) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        draw = torch.multinomial(self.weights, self.total_size, replacement=True, generator=g)
        return iter(draw[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self):
        return self.num_samples


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(800, 12, generator=g)
    y = (x[:, 0] > 1.0).long()  # imbalanced: about one sample in six is positive
    weights = torch.where(y == 1, 5.0, 1.0)
    sampler = DistributedWeightedSampler(weights, dist.get_world_size(), dist.get_rank())
    loader = DataLoader(TensorDataset(x, y), batch_size=25, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
