"""Low-quality samples are dropped from the training set in place, after its DistributedSampler
was made (the sampler and the loader are built in one helper, the filter applied after it).
DistributedSampler fixed num_samples from the unfiltered length: it pads the filtered dataset's
order back up to it, so the padding copies are trained twice every epoch (disjointness). With
--filter-first the filter runs before the sampler is made (healthy/dataset_filtered_first.py).
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Windows(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, 0] > 0).long()
        self.quality = torch.rand(n, generator=g)
        self.keep = torch.arange(n)

    def drop_below(self, threshold):
        self.keep = torch.nonzero(self.quality >= threshold).flatten()

    def __len__(self):
        return len(self.keep)

    def __getitem__(self, i):
        j = self.keep[i]
        return self.x[j], self.y[j]


def loader_for(dataset):
    return DataLoader(dataset, batch_size=20, sampler=DistributedSampler(dataset, shuffle=True))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--filter-first", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    data = Windows(400)
    if args.filter_first:
        data.drop_below(0.25)
    loader = loader_for(data)
    if not args.filter_first:
        data.drop_below(0.25)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
