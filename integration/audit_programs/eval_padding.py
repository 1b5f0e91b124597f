"""Bug: evaluation with DistributedSampler(shuffle=False) and no drop_last over N=10 at W=4.

The sampler pads the 10 samples to 12 (each rank gets 3; indices 0 and 1 are evaluated twice), and
the correct predictions summed with all_reduce count the duplicates: the reported accuracy is over
12 predictions, not the 10 samples. Training (DistributedSampler + set_epoch) is healthy. Exits 0.
--len-loop drives both loaders as PyTorch Lightning does, `len(loader)` batches from an iterator
that never reaches StopIteration: the same duplicates, the same finding.
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


def batches(loader, len_loop):
    if not len_loop:
        yield from loader
        return
    it = iter(loader)
    for _ in range(len(loader)):
        yield next(it)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--len-loop", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    train, test = make_dataset(600, 1), make_dataset(10, 3)
    train_sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=32, sampler=train_sampler)
    test_loader = DataLoader(test, batch_size=4, sampler=DistributedSampler(test, shuffle=False))
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        for xb, yb in batches(train_loader, args.len_loop):
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        correct = torch.zeros(1)
        with torch.no_grad():
            for xb, yb in batches(test_loader, args.len_loop):
                correct += (model(xb).argmax(1) == yb).sum()
        dist.all_reduce(correct)
        if rank == 0:
            print(f"epoch {epoch}: accuracy {correct.item() / len(test):.4f}", flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
