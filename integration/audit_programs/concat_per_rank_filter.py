"""Bug: a ConcatDataset one of whose sources each rank filters at random with its own seed.

The program mixes three sources into one ConcatDataset and keeps about 80 % of the largest one,
drawn at random "to rebalance the mix", after seeding torch with the rank (for dropout and
augmentation that differ per rank). Every rank keeps other samples of that source, and a
different number of them: the ranks' datasets differ in that part's length and content, so
DistributedSampler's shards do not split one dataset. Exits 0.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ConcatDataset, DataLoader, DistributedSampler, TensorDataset


class Source(TensorDataset):
    """One source of the mix: n samples of 8 features from the source's own seed, of which a
    fraction `keep` is kept at random."""

    def __init__(self, name, n, seed, keep=1.0):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 8, generator=g)
        if keep < 1.0:
            x = x[torch.rand(n) < keep]
        super().__init__(x, (x[:, 0] > 0).long())
        self.name = name


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)  # dropout and augmentation differ per rank
    mix = ConcatDataset([Source("news", 300, seed=1), Source("books", 300, seed=2),
                         Source("code", 400, seed=3, keep=0.8)])
    sampler = DistributedSampler(mix)
    loader = DataLoader(mix, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.1), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
