"""A step loop over an explicit iterator, with set_epoch called after iter(loader).

The loop makes its iterator at the top of the epoch, logs, then sets the sampler's epoch. With
worker processes the DataLoader hands the workers their first indices inside iter(), so each
epoch is drawn with the previous epoch's value: epochs 0 and 1 see the same order. Found as
reshuffle on loader 0 at epoch 1.
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
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(400, 8)
    y = x[:, :2].sum(1, keepdim=True)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, shuffle=True, seed=42)
    loader = DataLoader(ds, batch_size=20, sampler=sampler, num_workers=args.workers)
    model = DDP(nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = len(loader)
    for epoch in range(3):
        batches = iter(loader)
        print(f"rank {dist.get_rank()} epoch {epoch}: {steps} steps")
        sampler.set_epoch(epoch)
        for _ in range(steps):
            xb, yb = next(batches)
            opt.zero_grad()
            F.mse_loss(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
