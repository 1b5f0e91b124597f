"""Batches dispatched by node leaders: only local rank 0 of each node builds the training loader
(a DistributedSampler over the nodes: num_replicas = number of nodes, rank = the node's rank),
loads batches of batch_size x LOCAL_WORLD_SIZE and broadcasts each within its node; every process
trains its slice. The ranks that are not leaders build only the validation loader, so the
recorder numbers their loaders differently: the audit matches loaders by the line that made them.
--same-node-rank: the bug (every leader passes rank=0: both nodes train the same half)."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--same-node-rank", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    nodes, node = world // local_world, rank // local_world
    leader = node * local_world
    groups = [dist.new_group(list(range(n * local_world, (n + 1) * local_world))) for n in range(nodes)]
    group = groups[node]
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1280, 8, generator=g)
    y = (x[:, :2].sum(1) > 0).long()
    train, val = TensorDataset(x[:1024], y[:1024]), TensorDataset(x[1024:], y[1024:])
    bs = 16
    sampler = loader = None
    if local_rank == 0:
        sampler = DistributedSampler(train, num_replicas=nodes, rank=0 if args.same_node_rank else node,
                                     seed=11)
        loader = DataLoader(train, batch_size=bs * local_world, sampler=sampler)
    val_loader = DataLoader(val, batch_size=64, sampler=DistributedSampler(val, shuffle=False))
    steps = len(train) // nodes // (bs * local_world)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if sampler is not None:
            sampler.set_epoch(epoch)
        batches = iter(loader) if loader is not None else None
        for _ in range(steps):
            xb = torch.empty(bs * local_world, 8)
            yb = torch.empty(bs * local_world, dtype=torch.long)
            if batches is not None:
                xb, yb = next(batches)
            dist.broadcast(xb, src=leader, group=group)
            dist.broadcast(yb, src=leader, group=group)
            mine = slice(local_rank * bs, (local_rank + 1) * bs)
            opt.zero_grad()
            F.cross_entropy(model(xb[mine]), yb[mine]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            right = torch.zeros(2)
            for xv, yv in val_loader:
                right += torch.tensor([float((model(xv).argmax(1) == yv).sum()), float(len(yv))])
        dist.all_reduce(right)
        model.train()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
