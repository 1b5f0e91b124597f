"""A CPU DDP program that starts its own ranks, as the second seed article does: gloo, one
process per rank from torch.multiprocessing.spawn, rank and world size passed to
init_process_group. --nprocs N ranks (default 3). Healthy; --forget-set-epoch: every epoch repeats
epoch 0's order; --crash-rank R: rank R raises in its second epoch (the others are stopped);
--hang-rank R: rank R blocks forever in its second epoch (the others wait in their allreduce).
"""
import argparse
import os
import threading

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def run(rank, world_size, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    g = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(300, 10, generator=g), torch.randint(0, 3, (300,), generator=g))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank)
    loader = DataLoader(dataset, batch_size=25, sampler=sampler)
    model = DDP(nn.Linear(10, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        if not args.forget_set_epoch:
            sampler.set_epoch(epoch)
        for x, y in loader:
            if epoch == 1 and rank == args.crash_rank:
                raise ValueError(f"corrupt batch on rank {rank}")
            if epoch == 1 and rank == args.hang_rank:
                threading.Event().wait()  # a deadlock of its own: never returns
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    del model  # the DDP module goes first (torch 1.13 can hang at exit otherwise: docs/audit.md)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--nprocs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--forget-set-epoch", action="store_true")
    parser.add_argument("--crash-rank", type=int, default=-1)
    parser.add_argument("--hang-rank", type=int, default=-1)
    args = parser.parse_args()
    mp.spawn(run, args=(args.nprocs, args), nprocs=args.nprocs, join=True)
