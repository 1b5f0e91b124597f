"""A per-node group for the node's leader to share a setting with its node's ranks, made with
new_group over the node's own ranks only: each rank calls new_group once, for its own node.
new_group is a call of the whole world (every rank, every group, the same order), so on two nodes
the two nodes make different groups under one name and never connect (the timeout given here
ends the wait); on one node every rank asks for the same group and all is well.
--every-group: the healthy twin (every rank creates every node's group, keeping its own)."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def node_group(every_group):
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    world, rank = dist.get_world_size(), dist.get_rank()
    wait = datetime.timedelta(seconds=20)
    if not every_group:
        leader = rank // local_world * local_world
        return dist.new_group(list(range(leader, leader + local_world)), timeout=wait)
    mine = None
    for leader in range(0, world, local_world):
        group = dist.new_group(list(range(leader, leader + local_world)), timeout=wait)
        if leader <= rank < leader + local_world:
            mine = group
    return mine


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--every-group", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    group = node_group(args.every_group)
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    crop = torch.tensor([8 + dist.get_rank() // local_world])
    dist.broadcast(crop, src=dist.get_rank() // local_world * local_world, group=group)
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb[:, : int(crop)]), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
