"""A custom sampler written for one process and kept under DDP: it shuffles with a seed and the
epoch, as DistributedSampler does, but never takes its rank's share, so every rank yields the
whole dataset in the same order (disjointness, with "the sampler ignores its rank" as its cause).
With --shard it takes indices[rank::world] of that order: the healthy twin."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class EpochShuffleSampler(Sampler):
    def __init__(self, dataset, seed=0, part=0, parts=1):
        self.n, self.seed, self.part, self.parts, self.epoch = len(dataset), seed, part, parts, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.n, generator=g).tolist()
        return iter(order[self.part::self.parts])

    def __len__(self):
        return len(range(self.part, self.n, self.parts))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shard", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(240, 8, generator=g), torch.randint(0, 2, (240,), generator=g))
    sampler = EpochShuffleSampler(data, seed=7, part=rank if args.shard else 0,
                                  parts=world if args.shard else 1)
    loader = DataLoader(data, batch_size=20, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
