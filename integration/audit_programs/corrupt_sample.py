"""A rank that raises in its data pipeline: sample 28 of the dataset cannot be decoded.

The dataset's __getitem__ raises for index 28, which DistributedSampler(shuffle=False) hands to
rank 0 at W = 4 (indices 0, 4, 8, …) in its eighth batch; the other ranks then lose their peer
inside the gradient allreduce. The audit names rank 0's error first, with its line, and the
others' "Connection closed by peer" as the consequence.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Records(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == 28:
            raise ValueError(f"corrupt sample {i}")
        g = torch.Generator().manual_seed(i)
        x = torch.randn(5, generator=g)
        return x, int(x.sum() > 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    ds = Records(256)
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=1, sampler=sampler, num_workers=args.workers)
    model = DDP(nn.Linear(5, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
