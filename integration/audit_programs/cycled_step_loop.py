"""A training loop counted in steps, as many recipes write it: the stream is
itertools.cycle(loader), so the loop never meets StopIteration, and at each epoch boundary
(every len(loader) steps) the sampler is given the next epoch. But cycle saves the batches of the
first pass and replays them: the loader is iterated once, set_epoch reaches nothing, and every
epoch trains the same batches in the same order (reshuffle, named as a cache). With --reiterate
the loop makes a new iterator when the old one runs out: the healthy twin."""
import argparse
import itertools

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def batches(loader, sampler, reiterate):
    if not reiterate:
        yield from itertools.cycle(loader)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reiterate", action="store_true")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(512, 8, generator=g), torch.randint(0, 2, (512,), generator=g))
    sampler = DistributedSampler(data, seed=3)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps_per_epoch = len(loader)
    stream = batches(loader, sampler, args.reiterate)
    for step in range(args.epochs * steps_per_epoch):
        if not args.reiterate and step % steps_per_epoch == 0:
            sampler.set_epoch(step // steps_per_epoch)
        x, y = next(stream)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
