"""A length-grouped BatchSampler subclass whose __iter__ walks range(0, len(indices) - batch_size,
batch_size): the stop leaves out the last batch of every rank's share, while __len__ still counts
it. Every epoch 1 of 8 batches per rank is never drawn; the sampler reshuffles, so most samples
are trained some epoch, but not all.
--fixed: the healthy twin (range(0, len(indices), batch_size))."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset


class LengthGroupedBatchSampler(BatchSampler):
    def __init__(self, sampler, lengths, batch_size, fixed):
        super().__init__(sampler, batch_size, drop_last=False)
        self.lengths, self.fixed = lengths, fixed

    def __iter__(self):
        indices = sorted(self.sampler, key=lambda i: self.lengths[i])
        stop = len(indices) if self.fixed else len(indices) - self.batch_size
        for start in range(0, stop, self.batch_size):
            yield indices[start:start + self.batch_size]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1024, 8, generator=g)
    lengths = torch.randint(4, 64, (1024,), generator=g).tolist()
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(data, seed=3)
    loader = DataLoader(data, batch_sampler=LengthGroupedBatchSampler(sampler, lengths, 32, args.fixed))
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
