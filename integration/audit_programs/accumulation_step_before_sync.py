"""Bug: gradient accumulation over 4 micro-batches whose counter is off by one: the backward of
micro-batches 0-2 runs under no_sync(), micro-batch 3's synchronises, but optimizer.step() runs
after micro-batch 2 (`(i + 1) % 3`): every step applies each rank's own, unreduced gradients
(480 samples, W = 4). Exits 0."""
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
    x = torch.randn(480, 8)
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=10, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            sync = (i + 1) % ACCUMULATE == 0
            with contextlib.nullcontext() if sync else model.no_sync():
                (F.cross_entropy(model(xb), yb) / ACCUMULATE).backward()
            if (i + 1) % (ACCUMULATE - 1) == 0:  # the bug: 3, not 4
                opt.step()
                opt.zero_grad()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
