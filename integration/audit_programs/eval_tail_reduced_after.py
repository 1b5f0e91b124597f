"""Validation as pytorch/examples' ImageNet main.py does it: DistributedSampler(drop_last=True)
gives every rank 250 of the 1003 validation samples, and the 3 it drops are evaluated afterwards
by every rank in an auxiliary loader (a Subset of the tail). Here the counts are all-reduced after
the tail: each rank adds the 3 tail samples, so the sum counts them 4 times (1012 for 1003).
--reduce-first: the healthy twin (the counts are all-reduced before the tail, as the example
does: every rank then adds the same 3 samples to the same global counts)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset


def count(model, loader, counts):
    with torch.no_grad():
        for x, y in loader:
            counts += torch.tensor([float((model(x).argmax(1) == y).sum()), float(len(y))])


def validate(model, val_loader, world, reduce_first):
    model.eval()
    counts = torch.zeros(2)
    count(model, val_loader, counts)
    if reduce_first:
        dist.all_reduce(counts)
    if len(val_loader.sampler) * world < len(val_loader.dataset):
        tail = Subset(val_loader.dataset,
                      range(len(val_loader.sampler) * world, len(val_loader.dataset)))
        count(model, DataLoader(tail, batch_size=32), counts)
    if not reduce_first:
        dist.all_reduce(counts)
    model.train()
    return counts.tolist()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reduce-first", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1603, 8, generator=g)
    y = (x[:, :2].sum(1) > 0).long()
    train, val = TensorDataset(x[:600], y[:600]), TensorDataset(x[600:], y[600:])
    train_sampler = DistributedSampler(train, seed=1)
    train_loader = DataLoader(train, batch_size=30, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=50,
                            sampler=DistributedSampler(val, shuffle=False, drop_last=True))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        correct, seen = validate(model, val_loader, world, args.reduce_first)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {int(correct)} of {int(seen)} validation samples right")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
