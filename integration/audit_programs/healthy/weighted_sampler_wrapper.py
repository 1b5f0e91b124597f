"""Class-balanced training with catalyst's DistributedSamplerWrapper pattern: a
WeightedRandomSampler draws 1024 of the 1200 samples with replacement, seeded with seed + epoch
so every rank draws the same list, and a DistributedSampler over that list (its own dataset, 1024
long) gives each rank its positions in it, which it maps back to dataset indices. Indices past
1023 are drawn although the DistributedSampler was built over 1024 samples."""
from operator import itemgetter

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import (DataLoader, Dataset, DistributedSampler, TensorDataset,
                              WeightedRandomSampler)


class DrawsOf(Dataset):
    """The indices a sampler yields, as a dataset."""

    def __init__(self, sampler):
        self.draws = list(sampler)

    def __len__(self):
        return len(self.draws)

    def __getitem__(self, i):
        return self.draws[i]


class DistributedSamplerWrapper(DistributedSampler):
    def __init__(self, sampler, seed=0):
        super().__init__(DrawsOf(sampler), shuffle=True, seed=seed)
        self.sampler = sampler

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        self.sampler.generator.manual_seed(self.seed * 1000 + epoch)

    def __iter__(self):
        self.dataset = DrawsOf(self.sampler)
        positions = list(super().__iter__())
        return iter(itemgetter(*positions)(self.dataset.draws))


def main():
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1200, 8, generator=g)
    y = (torch.rand(1200, generator=g) < 0.2).long()
    weights = torch.where(y == 1, 4.0, 1.0)
    inner = WeightedRandomSampler(weights, num_samples=1024, replacement=True,
                                  generator=torch.Generator().manual_seed(0))
    sampler = DistributedSamplerWrapper(inner, seed=17)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, sampler=sampler)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
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
