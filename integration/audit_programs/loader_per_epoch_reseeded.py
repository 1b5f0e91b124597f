"""A fairseq-style loop: every epoch asks a task for a fresh batch iterator, which seeds numpy with
seed + epoch, shuffles the batch list and returns a new DataLoader over the rank's share of it.
The loop never passes the epoch, so the iterator's epoch stays at its default of 1: every epoch's
loader is seeded alike and trains the same batches in the same order.
--pass-epoch: the healthy twin (get_batch_iterator(..., epoch=epoch))."""
import argparse

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def get_batch_iterator(dataset, batch_size, seed, rank, world, epoch=1):
    np.random.seed(seed + epoch)
    order = np.random.permutation(len(dataset))
    batches = [order[i:i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    return DataLoader(dataset, batch_sampler=batches[rank::world])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pass-epoch", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1024, 8, generator=g)
    ds = TensorDataset(x, (x[:, :2].sum(1) > 0).long())
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1, 4):
        if args.pass_epoch:
            loader = get_batch_iterator(ds, 16, seed=7, rank=rank, world=world, epoch=epoch)
        else:
            loader = get_batch_iterator(ds, 16, seed=7, rank=rank, world=world)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
