"""Healthy: a loop shaped as PyTorch Lightning's fit, in plain PyTorch.

Before training, a sanity check runs two validation batches under no_grad; then each epoch
trains len(train_loader) batches and validates len(val_loader) batches, from iterators that are
never run to StopIteration (Lightning stops at len(loader)). Both loaders use DistributedSampler;
set_epoch on the training sampler every epoch. The validation set is unpadded (N divisible by
W x batch) and its metric is summed with all_reduce.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long())


def run_val(model, loader, limit=None):
    model.eval()
    correct = torch.zeros(1)
    it = iter(loader)
    with torch.no_grad():
        for _ in range(limit if limit is not None else len(loader)):
            xb, yb = next(it)
            correct += (model(xb).argmax(1) == yb).sum()
    model.train()
    dist.all_reduce(correct)
    return correct.item()


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    train, val = make_dataset(640, 1), make_dataset(320, 2)
    train_sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=16, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=10, sampler=DistributedSampler(val, shuffle=False))
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    run_val(model, val_loader, limit=2)  # the sanity check
    for epoch in range(3):
        train_sampler.set_epoch(epoch)
        it = iter(train_loader)
        for _ in range(len(train_loader)):
            xb, yb = next(it)
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        correct = run_val(model, val_loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: val accuracy {correct / len(val):.3f}", flush=True)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
