"""A ConcatDataset of two parts that each rank loads through a cache file of its own
("cache/rank-<R>-<part>.pt", kept in the part's `path`): the names differ by rank, the samples do
not. The audit compares the parts' content, not their names, and finds nothing."""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ConcatDataset, DataLoader, DistributedSampler, TensorDataset


class CachedPart(TensorDataset):
    def __init__(self, part, n, seed, rank):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 8, generator=g)
        super().__init__(x, (x[:, 0] > 0).long())
        self.path = "cache/rank-%d-%s.pt" % (rank, part)  # where this rank would keep its copy


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mix = ConcatDataset([CachedPart("a", 240, 1, rank), CachedPart("b", 160, 2, rank)])
    sampler = DistributedSampler(mix)
    loader = DataLoader(mix, batch_size=20, sampler=sampler)
    model = DDP(torch.nn.Linear(8, 2))
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
