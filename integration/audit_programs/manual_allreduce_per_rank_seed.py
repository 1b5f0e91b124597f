"""Gradients averaged by hand (no DDP): every parameter's .grad all-reduced and divided by the
world size before the optimizer step. The model is built after torch.manual_seed(rank) and its
parameters are never broadcast, so each rank starts from its own weights and stays apart."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def average_gradients(model, world):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # "different dropout masks per rank"
    x = torch.randn(400, 8, generator=torch.Generator().manual_seed(0))
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=25, sampler=sampler)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            average_gradients(model, world)
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
