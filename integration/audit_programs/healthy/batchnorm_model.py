"""Healthy: a model with BatchNorm under DDP, with broadcast_buffers on (the default) or off.

Each rank's forward updates the running statistics with its own batch, so between forwards the
ranks' buffers differ; DDP broadcasts rank 0's at the next forward (or never, with
--no-broadcast-buffers). The parameters are equal on every rank after every step, which is what
DDP promises. Training shuffles with DistributedSampler and set_epoch; rank 0 evaluates through
model.module over the whole test set.
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
    x = torch.randn(n, 16, generator=g)
    return TensorDataset(x, (x[:, :4].sum(1) > 0).long())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--no-broadcast-buffers", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    train, test = make_dataset(512, 1), make_dataset(100, 2)
    sampler = DistributedSampler(train, shuffle=True)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    net = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))
    model = DDP(net, broadcast_buffers=not args.no_broadcast_buffers)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        if dist.get_rank() == 0:
            net.eval()
            with torch.no_grad():
                x, y = test.tensors
                accuracy = (net(x).argmax(1) == y).float().mean().item()
            print(f"epoch {epoch}: accuracy {accuracy:.3f}", flush=True)
        dist.barrier()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
