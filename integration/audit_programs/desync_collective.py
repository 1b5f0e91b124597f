"""Bug: mismatched collective: after the first epoch, rank 1 all_reduces a metrics tensor of 3
elements while the other ranks all_reduce 2 (an extra metric added on one code path only).

What gloo does with it is recorded in the report of this program's first run (see the harness
docs): the allreduce of mismatched sizes may fail, hang or return silently with garbage.
Run it under a launcher timeout.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(600, 20, generator=g)
    dataset = TensorDataset(x, (x[:, :5].sum(1) > 0).long())
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(yb)
            count += len(yb)
        if epoch == 0 and rank == 1:
            metrics = torch.tensor([total, count, 0.0])  # the bug: an extra metric on rank 1 only
        else:
            metrics = torch.tensor([total, float(count)])
        dist.all_reduce(metrics)
        if rank == 0:
            print(f"epoch {epoch}: loss {metrics[0].item() / metrics[1].item():.6f}", flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
