"""Record files dealt to the ranks whole (files[rank::world], as WebDataset-style readers do): with
10 files of 64 records on 4 ranks, ranks 0 and 1 hold 3 files and ranks 2 and 3 hold 2. To keep
DDP's collectives in step the loop agrees on the shortest rank's batch count with
all_reduce(MIN) and stops there, so the longer ranks' last records are never trained in an epoch
(coverage, named as steps cut to the shortest rank). With --records the records themselves are
dealt evenly (160 each): the healthy twin."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset

FILES, RECORDS = 10, 64


class ShardSampler(Sampler):
    def __init__(self, rank, world, by_records, seed=9):
        if by_records:
            self.indices = list(range(FILES * RECORDS))[rank::world]
        else:
            self.indices = [f * RECORDS + r for f in range(FILES)[rank::world] for r in range(RECORDS)]
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter([self.indices[i] for i in torch.randperm(len(self.indices), generator=g)])

    def __len__(self):
        return len(self.indices)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(FILES * RECORDS, 8, generator=g),
                         torch.randint(0, 2, (FILES * RECORDS,), generator=g))
    sampler = ShardSampler(dist.get_rank(), dist.get_world_size(), args.records)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    steps = torch.tensor([len(loader)])
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for _, (x, y) in zip(range(int(steps)), loader):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
