"""The training batches are listed once, before the epoch loop, from a BatchSampler over a
DistributedSampler ("so that the scheduler knows the number of steps"), and that list is the
DataLoader's batch_sampler: set_epoch on the sampler reaches nothing, every epoch replays the list.
--in-loop: the healthy twin (the BatchSampler itself is the batch_sampler)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-loop", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(320, 6)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(data, shuffle=True)
    batches = BatchSampler(sampler, 16, drop_last=False)
    loader = DataLoader(data, batch_sampler=batches if args.in_loop else list(batches))
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
