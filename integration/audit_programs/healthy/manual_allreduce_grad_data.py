"""Data parallel training without the DDP wrapper, as older tutorials write it: the same seed on
every rank before building the model, then after each backward every parameter's gradient is
averaged in place with dist.all_reduce(param.grad.data) before optimizer.step(). Healthy: the
replicas stay equal (400 samples, W = 4). Its broken twin averages after the step:
--average-after-step (replica-consistency)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def average_gradients(model):
    world = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= world


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--average-after-step", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(400, 10)
    ds = TensorDataset(x, (x[:, 0] * x[:, 1] > 0).long())
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=20, sampler=sampler)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            if not args.average_after_step:
                average_gradients(model)
            opt.step()
            if args.average_after_step:
                average_gradients(model)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
