"""Gradient accumulation with every backward under no_sync().

The loop accumulates 4 micro-batches per optimizer step, but wraps all of them in no_sync(), so
DDP never allreduces a gradient and each rank steps on its own: the replicas drift apart. Found
as replica-consistency at the start of epoch 1, naming no_sync.
"""
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
    y = (x[:, 3] > 0).long()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            with model.no_sync():
                loss = F.cross_entropy(model(xb), yb) / ACCUMULATE
                loss.backward()
            if (i + 1) % ACCUMULATE == 0:
                opt.step()
                opt.zero_grad()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
