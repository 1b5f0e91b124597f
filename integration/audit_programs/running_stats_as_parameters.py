"""An input normaliser that keeps its running mean and std as nn.Parameter(requires_grad=False)
and updates them in forward from the batch: under DDP each rank updates them from its own batch,
and DDP neither averages nor broadcasts parameters after it is built: the replicas part.
--buffers: the healthy twin (register_buffer: DDP broadcasts rank 0's at every forward)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class RunningNorm(nn.Module):
    def __init__(self, dim, buffers):
        super().__init__()
        if buffers:
            self.register_buffer("mean", torch.zeros(dim))
            self.register_buffer("std", torch.ones(dim))
        else:
            self.mean = nn.Parameter(torch.zeros(dim), requires_grad=False)
            self.std = nn.Parameter(torch.ones(dim), requires_grad=False)

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                self.mean.lerp_(x.mean(0), 0.1)
                self.std.lerp_(x.std(0), 0.1)
        return (x - self.mean) / (self.std + 1e-5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--buffers", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(384, 5) * 3 + 1
    data = TensorDataset(x, (x[:, 0] > 1).long())
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(RunningNorm(5, args.buffers), nn.Linear(5, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
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
