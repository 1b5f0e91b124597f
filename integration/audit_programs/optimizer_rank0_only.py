"""Bug: only rank 0 steps the optimizer (`if rank == 0: optimizer.step()`): the replicas diverge.

Gradients are still allreduced every step, but ranks 1.. never update their parameters. Exits 0.
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
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            if rank == 0:  # the bug: "only the main process updates the model"
                optimizer.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch}: loss {total / len(loader):.6f}", flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
