"""Sharding by hand in memory: each rank keeps its own slice of the data in a TensorDataset and
shuffles it with DataLoader(shuffle=True), no DistributedSampler needed: the ranks' datasets
differ by design, and their samples are disjoint."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 8, generator=g)
    y = (x[:, 2] > 0).long()
    shard = TensorDataset(x[rank::world], y[rank::world])
    torch.manual_seed(rank)
    loader = DataLoader(shard, batch_size=32, shuffle=True)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
