"""Bug: a random subset of the data drawn after a per-rank seed.

The program seeds torch with the rank (dropout and augmentation that differ per rank) and then,
for a quick experiment, trains on a random 2000 of its 10000 samples: every rank draws another
subset, so DistributedSampler's shards split four different datasets. With --permute it keeps
every sample but shuffles the data once up front, again after the per-rank seed: the ranks hold
the same samples in different orders, and index i names another sample on each rank. Both are
found as coverage, naming what differs (other samples; the same samples in another order). Exits 0.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def load_data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10000, 16, generator=g)
    return x, (x[:, :4].sum(1) > 0).long()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--permute", action="store_true", help="shuffle all the data once instead")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(1234 + rank)  # dropout and augmentation differ per rank
    x, y = load_data()
    if args.permute:
        order = torch.randperm(len(x))  # shuffle once up front
        x, y = x[order], y[order]
    else:
        keep = torch.randperm(len(x))[:2000]  # a quick experiment on a fifth of the data
        x, y = x[keep], y[keep]
    dataset = TensorDataset(x, y)
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
