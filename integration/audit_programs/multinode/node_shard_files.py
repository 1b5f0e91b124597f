"""A corpus of shard files split in two levels, as large-corpus jobs do: each node reads its own
files (file k on node k % nodes), and a DistributedSampler over the node's ConcatDataset splits
its records among the node's ranks (num_replicas=LOCAL_WORLD_SIZE, rank=LOCAL_RANK). Healthy on
any number of nodes: every record of every file on exactly one rank per epoch.
--node-from-env: the bug: the node's index is read from NODE_RANK with a default of 0, which
torchrun does not set, so every node reads node 0's files and the nodes train the same records.
--global-sampler: the other bug: each node reads its own files, but the DistributedSampler keeps
its defaults (the whole world, by global rank), so each node's ranks draw only their global
ranks' slices of the node's records and the rest are never trained."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ConcatDataset, DataLoader, DistributedSampler, TensorDataset

FILES, RECORDS = 8, 64


def read_file(k):
    g = torch.Generator().manual_seed(500 + k)
    x = torch.randn(RECORDS, 12, generator=g)
    return TensorDataset(x, (x[:, :3].sum(1) > 0).long())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-from-env", action="store_true")
    parser.add_argument("--global-sampler", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    nodes = dist.get_world_size() // local_world
    if args.node_from_env:
        node = int(os.environ.get("NODE_RANK", 0))
    else:
        node = dist.get_rank() // local_world
    shard = ConcatDataset([read_file(k) for k in range(node, FILES, nodes)])
    if args.global_sampler:
        sampler = DistributedSampler(shard, seed=3)
    else:
        sampler = DistributedSampler(shard, num_replicas=local_world, rank=local_rank, seed=3)
    loader = DataLoader(shard, batch_size=16, sampler=sampler)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    if dist.get_rank() == 0:
        print("trained on %d records per node" % len(shard))
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
