"""Uneven inputs handled as torch documents it: each rank reads its own shard of another length,
and the loop runs under torch.distributed.algorithms.join.Join([model]), so a rank that runs out
shadows the others' gradient allreduces until every rank has joined."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def shard(rank):
    g = torch.Generator().manual_seed(100 + rank)
    n = 40 + 10 * rank  # the shards were written by another job: their lengths differ
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    loader = DataLoader(shard(dist.get_rank()), batch_size=10, shuffle=True)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        with Join([model]):
            for xb, yb in loader:
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
