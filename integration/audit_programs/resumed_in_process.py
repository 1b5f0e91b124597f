"""A job that survives a pre-emption in the same process: the training function raises when it
is interrupted in epoch 0, the main loop catches it and runs the training function again from the
checkpoint, whose resume sampler skips what was trained of the interrupted epoch. The checkpoint
counts the samples of every rank (steps x batch size x world size), and each rank skips that many
in its own shard: 3 of every 4 samples it had left are never trained in epoch 0.
--own-count: the healthy twin (the checkpoint counts the rank's own samples)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset


class SkipSampler(Sampler):
    """The DistributedSampler's order, its first `skip` indices dropped once (a resumed epoch)."""

    def __init__(self, base, skip=0):
        self.base, self.skip = base, skip

    def set_epoch(self, epoch):
        self.base.set_epoch(epoch)

    def __iter__(self):
        order = list(self.base)[self.skip:]
        self.skip = 0
        return iter(order)

    def __len__(self):
        return len(self.base) - self.skip


class Preempted(Exception):
    pass


def train(ds, checkpoint, args, interrupt):
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    start_epoch, skip = 0, 0
    if checkpoint:
        model.module.load_state_dict(checkpoint["model"])
        opt.load_state_dict(checkpoint["opt"])
        start_epoch, skip = checkpoint["epoch"], checkpoint["samples_done"]
    sampler = SkipSampler(DistributedSampler(ds, seed=4), skip)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    for epoch in range(start_epoch, 3):
        sampler.set_epoch(epoch)
        done = 0
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            done += len(y) * (1 if args.own_count else world)
            checkpoint.clear()
            checkpoint.update(model=model.module.state_dict(), opt=opt.state_dict(),
                              epoch=epoch, samples_done=done)
            if interrupt and epoch == 0 and step == 1:
                raise Preempted()
    del model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--own-count", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1024, 8, generator=g)
    ds = TensorDataset(x, (x[:, :2].sum(1) > 0).long())
    checkpoint = {}
    try:
        train(ds, checkpoint, args, interrupt=True)
    except Preempted:
        train(ds, checkpoint, args, interrupt=False)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
