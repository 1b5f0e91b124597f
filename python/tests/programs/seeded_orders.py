"""Seeds and orders drawn from the global generators (tests/test_seeds.py): the program seeds torch,
random and numpy, then iterates a loader whose hand-written sampler shuffles with torch.randperm
and one whose sampler shuffles with a generator of its own."""
import random

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Sampler, TensorDataset


class GlobalShuffle(Sampler):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(torch.randperm(self.n).tolist())

    def __len__(self):
        return self.n


class OwnShuffle(GlobalShuffle):
    def __iter__(self):
        return iter(torch.randperm(self.n, generator=torch.Generator().manual_seed(3)).tolist())


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(11)
    random.seed(12)
    np.random.seed(13)
    data = TensorDataset(torch.arange(8.0))
    for sampler in (GlobalShuffle(8), OwnShuffle(8)):
        for _ in DataLoader(data, batch_size=4, sampler=sampler):
            pass
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
