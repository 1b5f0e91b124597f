"""Hand-written data parallelism: each rank builds its model after a per-rank seed, then "syncs"
the initial weights with a broadcast of torch.nn.utils.parameters_to_vector(model.parameters()),
a new tensor that is never written back, and averages gradients with all_reduce. The replicas
never start equal. --write-back: the healthy twin (vector_to_parameters after the broadcast)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def sync_initial_params(model, write_back):
    vec = parameters_to_vector(model.parameters())
    dist.broadcast(vec, src=0)
    if write_back:
        vector_to_parameters(vec, model.parameters())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--write-back", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(100 + dist.get_rank())
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    sync_initial_params(model, args.write_back)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(data, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
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
