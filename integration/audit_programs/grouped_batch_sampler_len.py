"""Aspect-ratio grouping as torchvision's detection reference does it: a GroupedBatchSampler over a
DistributedSampler yields a batch whenever one group's buffer fills, then flushes the partly
filled buffers at the end. Its __len__ is len(sampler) // batch_size, fewer than it yields, and
the training loop runs len(loader) iterations of next(it): each rank's flushed groups are never
trained.
--merge-leftovers: the healthy twin (the partly filled buffers are merged into full batches, as
torchvision's own sampler completes its count, and __len__ counts them: every rank yields the same
number of batches, each sample once)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset


class GroupedBatchSampler(BatchSampler):
    def __init__(self, sampler, group_ids, batch_size, merge_leftovers):
        self.sampler, self.group_ids, self.batch_size = sampler, group_ids, batch_size
        self.merge_leftovers = merge_leftovers

    def _batches(self):
        buffers = {}
        for i in self.sampler:
            group = buffers.setdefault(self.group_ids[i], [])
            group.append(i)
            if len(group) == self.batch_size:
                yield list(group)
                group.clear()
        if self.merge_leftovers:
            rest = [i for group in buffers.values() for i in group]
            for k in range(0, len(rest), self.batch_size):
                yield rest[k:k + self.batch_size]
            return
        for group in buffers.values():
            if group:
                yield list(group)

    def __iter__(self):
        return self._batches()

    def __len__(self):
        if self.merge_leftovers:
            return (len(self.sampler) + self.batch_size - 1) // self.batch_size
        return len(self.sampler) // self.batch_size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--merge-leftovers", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1024, 8, generator=g)
    y = (x[:, :2].sum(1) > 0).long()
    group_ids = (x[:, 2] > 0).long().tolist()  # wide or tall images
    sampler = DistributedSampler(TensorDataset(x, y), seed=5)
    batches = GroupedBatchSampler(sampler, group_ids, 16, args.merge_leftovers)
    loader = DataLoader(TensorDataset(x, y), batch_sampler=batches)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        it = iter(loader)
        for _ in range(len(loader)):
            xb, yb = next(it)
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
