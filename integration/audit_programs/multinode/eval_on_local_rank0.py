"""Evaluation "on the main process", chosen as LOCAL_RANK == 0, the way single-node scripts pick
it: on two nodes that is one rank per node, each evaluating the whole validation set, and the
all_reduce of (correct, seen) that follows counts every sample twice. On one node it is right.
--global: the healthy twin (dist.get_rank() == 0).
Runs on a laptop unmodified: ddp-sim launch --audit --cpu --nnodes 2 -n 2 -- python3 THIS."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--global", dest="use_global", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    is_main = dist.get_rank() == 0 if args.use_global else int(os.environ["LOCAL_RANK"]) == 0
    torch.manual_seed(0)
    x = torch.randn(600, 6)
    y = (x[:, 0] > 0).long()
    train, val = TensorDataset(x[:400], y[:400]), TensorDataset(x[400:], y[400:])
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=25, sampler=sampler)
    val_loader = DataLoader(val, batch_size=50)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        stats = torch.zeros(2)
        if is_main:
            with torch.no_grad():
                for xb, yb in val_loader:
                    stats += torch.tensor([(model.module(xb).argmax(1) == yb).sum().item(), len(yb)])
        dist.all_reduce(stats)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: accuracy {stats[0] / stats[1]:.3f} on {int(stats[1])} samples")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
