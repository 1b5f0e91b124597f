"""A random subset of the data, and a shuffle of all of it, drawn from a generator seeded alike on
every rank; the per-rank seed (dropout) set after the data is built."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10000, 16, generator=g)
    y = (x[:, :4].sum(1) > 0).long()
    order = torch.randperm(len(x), generator=g)  # the same draw on every rank
    x, y = x[order], y[order]
    keep = torch.randperm(len(x), generator=g)[:2000]
    dataset = TensorDataset(x[keep], y[keep])
    torch.manual_seed(1234 + rank)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=50, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
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
