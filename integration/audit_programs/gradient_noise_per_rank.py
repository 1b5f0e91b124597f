"""Annealed gradient noise (Neelakantan et al., 2015) added after backward: the noise generator is
seeded with the rank "so that each worker explores differently", which gives every replica its own
gradient after DDP has averaged them, and the models part from the first step.
--same-seed: the healthy twin (one seed on every rank: the same noise everywhere)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def add_gradient_noise(model, generator, step, eta=0.01, gamma=0.55):
    std = (eta / (1 + step) ** gamma) ** 0.5
    for p in model.parameters():
        if p.grad is not None:
            p.grad.add_(torch.randn(p.grad.shape, generator=generator) * std)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--same-seed", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(512, 10)
    y = (x[:, :3].sum(1) > 0).long()
    train = TensorDataset(x, y)
    sampler = DistributedSampler(train, shuffle=True, seed=1)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    noise = torch.Generator().manual_seed(1234 if args.same_seed else 1234 + rank)
    step = 0
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            add_gradient_noise(model, noise, step)
            opt.step()
            step += 1
    if rank == 0:
        print(f"trained {step} steps")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
