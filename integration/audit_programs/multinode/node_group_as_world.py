"""Gradients averaged by hand over a process group per node (built for a hierarchical
all-reduce), whose cross-node step was left out: on one node the node's group is the world; on
two, each node trains its own model. --hierarchical adds the cross-node step (the healthy twin).
--ddp leaves the averaging to DDP(model, process_group=the node's group): the same bug through DDP;
--ddp --world builds DDP over the default group (its healthy twin).
--leaders: the hierarchical all-reduce of one flattened gradient buffer as communication-minded
code writes it (within the node, then across the nodes' local rank 0 only), whose last step, the
broadcast of the sum within each node, was forgotten: the other local ranks keep their node's sum;
--leaders --broadcast adds it (the healthy twin)."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hierarchical", action="store_true")
    parser.add_argument("--ddp", action="store_true")
    parser.add_argument("--world", action="store_true")
    parser.add_argument("--leaders", action="store_true")
    parser.add_argument("--broadcast", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    per_node = int(os.environ["LOCAL_WORLD_SIZE"])
    nodes = world // per_node
    node_groups = [dist.new_group(list(range(n * per_node, (n + 1) * per_node))) for n in range(nodes)]
    cross_groups = [dist.new_group(list(range(k, world, per_node))) for k in range(per_node)]
    my_node, my_cross = node_groups[rank // per_node], cross_groups[rank % per_node]
    leaders = cross_groups[0]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    x = torch.randn(512, 8, generator=torch.Generator().manual_seed(1))
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=32, sampler=sampler)
    if args.ddp:
        model = nn.parallel.DistributedDataParallel(
            model, process_group=None if args.world else my_node)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            if args.leaders:
                flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
                dist.all_reduce(flat, group=my_node)
                if rank % per_node == 0:
                    dist.all_reduce(flat, group=leaders)
                if args.broadcast:
                    dist.broadcast(flat, src=rank - rank % per_node, group=my_node)
                flat /= world
                offset = 0
                for p in model.parameters():
                    p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
                opt.step()
                continue
            for p in [] if args.ddp else model.parameters():
                dist.all_reduce(p.grad, group=my_node)
                if args.hierarchical:
                    dist.all_reduce(p.grad, group=my_cross)
                p.grad /= world if args.hierarchical else per_node
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
