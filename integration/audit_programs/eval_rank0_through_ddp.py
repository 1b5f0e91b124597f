"""Bug: evaluation on rank 0 only, through the DDP wrapper, of a model with BatchNorm.

DDP's forward broadcasts the module's buffers (BatchNorm's running statistics) from rank 0: a
collective. Rank 0's evaluation forwards are answered by the other ranks' next training forwards,
out of step, and its last one by nobody: the others have finished, and rank 0 fails with a lost
connection (or hangs, on NCCL). The program as a user writes it, from a forum question.
"""
import datetime
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 16, generator=g)
    y = (x.sum(1) > 0).long()
    train = TensorDataset(x[:448], y[:448])
    val = TensorDataset(x[448:], y[448:])
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        if rank == 0:  # evaluate on rank 0 only, through the DDP wrapper
            acc = evaluate(model, DataLoader(val, batch_size=64))
            print(f"epoch {epoch}: val acc {acc:.3f}", flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
