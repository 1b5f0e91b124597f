"""Validation on a strided split without padding (401 samples: 101, 100, 100, 100; batch 25, so 5
batches on rank 0 and 4 on the others) that all-reduces its running metric after every batch: rank
0's fifth all_reduce meets the others' next collective. --once: the healthy twin (the metric summed
locally, all-reduced once after the loop)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--once", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(801, 6)
    y = (x[:, 0] > 0).long()
    train, val = TensorDataset(x[:400], y[:400]), TensorDataset(x[400:], y[400:])
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=25, sampler=sampler)
    val_loader = DataLoader(Subset(val, list(range(rank, len(val), world))), batch_size=25)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        stats = torch.zeros(2)
        with torch.no_grad():
            for xb, yb in val_loader:
                batch = torch.tensor([(model.module(xb).argmax(1) == yb).sum().item(), len(yb)])
                if not args.once:
                    dist.all_reduce(batch)
                stats += batch
        if args.once:
            dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch}: accuracy {stats[0] / stats[1]:.3f}")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
