"""A class-balanced sampler for an imbalanced dataset, as teams write one: each epoch it keeps as
many samples of every class as the rarest class has, shuffles them with seed + epoch and deals them
to the ranks. The bug: it keeps the first k samples of each class and shuffles only those, so the
very same subset is trained every epoch and the rest of the frequent classes never is.
--shuffle-first: the healthy twin (each class shuffled before the cut: a new subset each epoch)."""
import argparse
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class ClassBalancedSampler(Sampler):
    def __init__(self, labels, num_replicas, rank, shuffle_first, seed=0):
        self.by_class = [torch.nonzero(labels == c).flatten() for c in range(int(labels.max()) + 1)]
        self.per_class = min(len(ix) for ix in self.by_class)
        self.num_replicas, self.rank, self.seed, self.epoch = num_replicas, rank, seed, 0
        self.shuffle_first = shuffle_first
        self.num_samples = math.ceil(self.per_class * len(self.by_class) / num_replicas)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        if self.shuffle_first:
            keep = [ix[torch.randperm(len(ix), generator=g)][: self.per_class] for ix in self.by_class]
        else:
            keep = [ix[: self.per_class] for ix in self.by_class]
        idx = torch.cat(keep)
        idx = idx[torch.randperm(len(idx), generator=g)].tolist()
        idx += idx[: self.num_samples * self.num_replicas - len(idx)]
        return iter(idx[self.rank::self.num_replicas])

    def __len__(self):
        return self.num_samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shuffle-first", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    y = torch.cat([torch.zeros(300), torch.ones(100)]).long()
    x = torch.randn(400, 4) + y[:, None].float()
    data = TensorDataset(x, y)
    sampler = ClassBalancedSampler(y, dist.get_world_size(), dist.get_rank(), args.shuffle_first)
    loader = DataLoader(data, batch_size=25, sampler=sampler)
    model = DDP(nn.Linear(4, 2))
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
