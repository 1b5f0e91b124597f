"""Lookahead by hand: every 4 optimizer steps the fast weights are pulled halfway to a copy of slow
weights, which then take their place. Written as a logging-style helper that runs on rank 0 only
(`if rank == 0:`, as a @rank_zero_only callback would), so rank 0's replica takes other weights
between two steps while every rank runs the same steps (replica-consistency, named as weights
changed in place between steps). With --every-rank each rank does it: the healthy twin."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--every-rank", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(512, 8, generator=g), torch.randint(0, 2, (512,), generator=g))
    sampler = DistributedSampler(data, seed=8)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    slow = [p.detach().clone() for p in model.parameters()]
    step = 0
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            step += 1
            if step % 4 == 0 and (args.every_rank or dist.get_rank() == 0):
                with torch.no_grad():
                    for s, p in zip(slow, model.parameters()):
                        s.add_(p - s, alpha=0.5)
                        p.copy_(s)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
