"""Each rank takes its own shard of the corpus by hand (a Subset of indices rank, rank + W, ...),
then wraps it in a DistributedSampler as the DDP tutorial says: the shard is sharded again, so each
rank trains a quarter of its quarter (coverage, with the double sharding as its cause)."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(0)
    corpus = TensorDataset(torch.randn(800, 8, generator=g), torch.randint(0, 2, (800,), generator=g))
    shard = Subset(corpus, list(range(rank, len(corpus), world)))
    sampler = DistributedSampler(shard, shuffle=True)
    loader = DataLoader(shard, batch_size=25, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
