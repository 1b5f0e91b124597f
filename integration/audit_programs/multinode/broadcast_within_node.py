"""Hand-written data parallelism on two nodes: each rank builds its model after a per-rank seed,
then the node's leader broadcasts its weights within a per-node group (made on every rank, as
new_group requires), and gradients are all-reduced over the world. The two nodes start from
different models and stay apart; on one node the group is the world and all is well.
--world: the healthy twin (the initial broadcast over the default group)."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    groups = [dist.new_group(list(range(l, l + local_world))) for l in range(0, world, local_world)]
    leader = rank // local_world * local_world
    torch.manual_seed(100 + rank)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    for p in model.parameters():
        if args.world:
            dist.broadcast(p.data, src=0)
        else:
            dist.broadcast(p.data, src=leader, group=groups[rank // local_world])
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(data, seed=0)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
