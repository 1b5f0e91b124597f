"""Every rank seeds numpy alike, and a block-shuffling sampler draws its order from numpy's global
generator, the same on every rank -- until rank 0 prints a preview of a few random training rows
with np.random.choice before the loop. Rank 0's generator then stands elsewhere when the sampler
draws: its blocks overlap the others' and some are never drawn (coverage and disjointness, named
as a draw on some ranks between the seed and the sampler's). With --own-generator the sampler
draws from np.random.default_rng([seed, epoch]): the healthy twin."""
import argparse

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class BlockShuffleSampler(Sampler):
    def __init__(self, n, rank, world, own_generator, seed=17, block=16):
        self.n, self.rank, self.world, self.block = n, rank, world, block
        self.own, self.seed, self.epoch = own_generator, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        count = self.n // self.block
        if self.own:
            blocks = np.random.default_rng([self.seed, self.epoch]).permutation(count)
        else:
            blocks = np.random.permutation(count)
        return iter([int(b) * self.block + i for b in blocks[self.rank::self.world]
                     for i in range(self.block)])

    def __len__(self):
        return (self.n // self.block // self.world) * self.block


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--own-generator", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    np.random.seed(17)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(512, 8, generator=g), torch.randint(0, 2, (512,), generator=g))
    if rank == 0:
        for r in np.random.choice(len(data), 3, replace=False):
            print("preview row %d: label %d" % (r, int(data[int(r)][1])))
    sampler = BlockShuffleSampler(len(data), rank, world, args.own_generator)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
