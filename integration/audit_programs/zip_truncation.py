"""Bug: zip() over two DataLoaders of different lengths stops at the shorter one.

Two datasets of 600 and 500 samples, batch 64, DistributedSampler + set_epoch on both (the loop of
the second seed article). At W=4 each rank has 150 and 125 samples: 3 and 2 batches; zip stops
after 2, so 22 samples per rank (88 in all) of the first dataset are never seen in any epoch.
Exits 0.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    return TensorDataset(x, (x[:, :5].sum(1) > 0).long())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    dataset1, dataset2 = make_dataset(600, 1), make_dataset(500, 2)
    sampler1, sampler2 = DistributedSampler(dataset1), DistributedSampler(dataset2)
    loader1 = DataLoader(dataset1, batch_size=64, sampler=sampler1)
    loader2 = DataLoader(dataset2, batch_size=64, sampler=sampler2)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    for epoch in range(args.epochs):
        sampler1.set_epoch(epoch)
        sampler2.set_epoch(epoch)
        total, steps = 0.0, 0
        for (x1, y1), (x2, y2) in zip(loader1, loader2):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x1), y1) + F.cross_entropy(model(x2), y2)
            loss.backward()
            optimizer.step()
            total += loss.item()
            steps += 1
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {total / steps:.6f} ({steps} steps)", flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
