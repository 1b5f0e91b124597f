"""Class-balanced sampling with a WeightedRandomSampler per rank, every rank seeded alike.

Each rank builds the same WeightedRandomSampler with a generator seeded 1234, so every rank draws
the same indices: the ranks train on the same samples. Found as ranks-agree.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler


def main():
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(800, 6)
    y = (x[:, 0] > 0.8).long()  # imbalanced: about one in five is class 1
    counts = torch.bincount(y)
    weights = (1.0 / counts.float())[y]
    g = torch.Generator().manual_seed(1234)
    sampler = WeightedRandomSampler(weights, num_samples=len(y) // world, replacement=True,
                                    generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=25, sampler=sampler)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
