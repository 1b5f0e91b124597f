"""Bug: loss.backward() every step and no optimizer at all (the loop of the first seed article):
the parameters never change and the gradients just accumulate. Exits 0.
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
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(400, 1, generator=g)
    dataset = TensorDataset(x)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=10, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(1, 10), nn.ReLU(), nn.Linear(10, 1)))
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        epoch_loss = 0.0
        for (xb,) in loader:
            y = model(xb)
            loss = F.mse_loss(y, xb)
            epoch_loss += loss.item()
            loss.backward()
        if dist.get_rank() == 0:
            print(f"epoch {epoch + 1} loss: {epoch_loss / len(loader):.6f}", flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
