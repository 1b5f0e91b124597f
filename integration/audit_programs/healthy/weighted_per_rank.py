"""Class-balanced sampling: a WeightedRandomSampler per rank, its generator seeded seed + rank."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

SEED = 1234


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(800, 6)
    y = (x[:, 0] > 0.8).long()
    weights = (1.0 / torch.bincount(y).float())[y]
    for epoch in range(2):
        g = torch.Generator().manual_seed(SEED + 1000 * epoch + rank)
        sampler = WeightedRandomSampler(weights, num_samples=len(y) // world, generator=g)
        loader = DataLoader(TensorDataset(x, y), batch_size=25, sampler=sampler)
        if epoch == 0:
            model = DDP(nn.Linear(6, 2))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
