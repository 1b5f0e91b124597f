"""Gradient accumulation: no_sync() on every micro-batch but the last of each optimizer step."""
import contextlib

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUMULATE = 4


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(512, 12)
    ds = TensorDataset(x, (x[:, 3] > 0).long())
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            last = (i + 1) % ACCUMULATE == 0
            with contextlib.nullcontext() if last else model.no_sync():
                loss = F.cross_entropy(model(xb), yb) / ACCUMULATE
                loss.backward()
            if last:
                opt.step()
                opt.zero_grad()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
