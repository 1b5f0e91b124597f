"""Post-local SGD across two nodes: after a warm-up DDP averages gradients only within each node
(torch's post_localSGD_hook with the node's group as its subgroup), and a PeriodicModelAverager
brings the replicas together every few steps. The bug: the averager is given the node's group
too, so the two nodes never meet again after the warm-up (replica-consistency, named as
post-local SGD averaged per node). With --world-averager the averager spans the world: the
healthy twin (the replicas agree at every averaging step, which ends each epoch here)."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import (
    PostLocalSGDState, post_localSGD_hook)
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-averager", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    world = dist.get_world_size()
    node_groups = [dist.new_group(list(range(n, n + local_world)))
                   for n in range(0, world, local_world)]
    node_group = node_groups[dist.get_rank() // local_world]
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(512, 8, generator=g), torch.randint(0, 2, (512,), generator=g))
    sampler = DistributedSampler(data, seed=5)
    loader = DataLoader(data, batch_size=16, sampler=sampler)  # 8 steps an epoch on 4 ranks
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    state = PostLocalSGDState(process_group=None, subgroup=node_group, start_localSGD_iter=4)
    model.register_comm_hook(state, post_localSGD_hook)
    averager = PeriodicModelAverager(period=4, warmup_steps=4,
                                     process_group=None if args.world_averager else node_group)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            averager.average_parameters(model.parameters())
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
