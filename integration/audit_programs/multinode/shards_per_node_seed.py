"""Streaming training over pre-packed shards, written for several nodes: every epoch the shard
list is shuffled, node n takes every nodes-th shard of it and the node's ranks split those. The
bug: the shuffle's seed has the node's rank in it ("decorrelate the nodes"), so the nodes shuffle
differently and some shards reach both nodes while others reach none. On one node it is right.
--shared-seed: the healthy twin (one seed for every node).
Runs on a laptop unmodified: ddp-sim launch --audit --cpu --nnodes 2 -n 2 -- python3 THIS."""
import argparse
import os
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

SHARDS, PER_SHARD = 16, 32


class ShardStream(IterableDataset):
    def __init__(self, node, nodes, local_rank, local_world, node_seed):
        g = torch.Generator().manual_seed(5)
        self.shards = [torch.randn(PER_SHARD, 6, generator=g) for _ in range(SHARDS)]
        self.node, self.nodes = node, nodes
        self.local_rank, self.local_world = local_rank, local_world
        self.node_seed, self.epoch = node_seed, 0

    def __iter__(self):
        rng = random.Random(100 + self.epoch + (self.node if self.node_seed else 0))
        order = list(range(SHARDS))
        rng.shuffle(order)
        mine = order[self.node::self.nodes][self.local_rank::self.local_world]
        for s in mine:  # each shard's records in an order of their own
            within = torch.Generator().manual_seed(rng.randrange(2**31))
            for i in torch.randperm(PER_SHARD, generator=within).tolist():
                row = self.shards[s][i]
                yield row, (row[0] > 0).long()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared-seed", action="store_true")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    node = int(os.environ["GROUP_RANK"])
    dist.init_process_group("gloo")
    nodes = dist.get_world_size() // local_world
    stream = ShardStream(node, nodes, local_rank, local_world, node_seed=not args.shared_seed)
    loader = DataLoader(stream, batch_size=16)
    torch.manual_seed(0)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        stream.epoch = epoch
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
