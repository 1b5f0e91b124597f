"""Gradients averaged by hand (no DDP), done right: a per-rank seed for the data augmentation,
but rank 0's initial parameters broadcast to every rank before training, then every parameter's
.grad all-reduced in the parameters' own order and divided by the world size."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    x = torch.randn(400, 8, generator=torch.Generator().manual_seed(0))
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=25, sampler=sampler)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb + 0.01 * torch.randn_like(xb)), yb).backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
