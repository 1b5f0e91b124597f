"""A job that fine-tunes after a first phase and "resumes" its optimizer: the checkpoint's
optimizer state (Adam's moments) is loaded under `if rank == 0:`, as the model's often is. DDP
broadcasts the parameters when the new wrapper is built, never the optimizer's state, so rank 0
steps with its moments and the others from zero: the replicas part at the first step.
--every-rank: the healthy twin (every rank loads the state)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def train(model, opt, loader, sampler, epochs):
    for epoch in epochs:
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--every-rank", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(512, 10)
    data = TensorDataset(x, (x[:, :3].sum(1) > 0).long())
    sampler = DistributedSampler(data, seed=4)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, opt, loader, sampler, range(0, 1))
    checkpoint = {"optimizer": opt.state_dict()}
    del model
    # phase 2: a new wrapper and optimizer, the optimizer's state restored from the checkpoint
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if args.every_rank or dist.get_rank() == 0:
        opt.load_state_dict(checkpoint["optimizer"])
    train(model, opt, loader, sampler, range(1, 3))
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
