"""Gradient accumulation by a token budget: micro-batches of variable-length sequences are
accumulated under model.no_sync() until the tokens seen reach the budget, then one synchronised
backward and a step. Counted on each rank's own batches, the ranks close their windows on
different micro-batches: one rank's gradient allreduce meets another's next one, and Gloo fails.
--synced: the healthy twin (the token count is all-reduced, so every rank decides alike)."""
import argparse
import contextlib

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BUDGET = 200


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--synced", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(4)
    x = torch.randn(512, 8, generator=g)
    tokens = torch.randint(1, 40, (512,), generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long(), tokens)
    sampler = DistributedSampler(data, seed=2)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen = 0
        for i, (xb, yb, tb) in enumerate(loader):
            count = tb.sum()
            if args.synced:
                dist.all_reduce(count)
                count = count // dist.get_world_size()
            seen += int(count)
            last = i == len(loader) - 1
            step = seen >= BUDGET or last
            with contextlib.nullcontext() if step else model.no_sync():
                F.cross_entropy(model(xb), yb).backward()
            if step:
                opt.step()
                opt.zero_grad()
                seen = 0
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
