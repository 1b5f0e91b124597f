"""A loss-spike guard: after backward, a rank whose own loss is far above its running mean skips
optimizer.step(). DDP has already averaged the gradients, so every other rank steps while that
one keeps its old weights: the replicas part (replica-consistency, named by the step at which the
ranks' optimizer steps part). With --agreed the spike is judged on the loss all-reduced across
the ranks, so every rank skips the same steps: the healthy twin."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--agreed", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = torch.randint(0, 2, (512,), generator=g)
    sampler = DistributedSampler(TensorDataset(x, y), seed=2)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    running = None
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            value = loss.detach().clone()
            if args.agreed:
                dist.all_reduce(value)
                value /= dist.get_world_size()
            spike = running is not None and value.item() > 1.05 * running
            running = value.item() if running is None else 0.9 * running + 0.1 * value.item()
            if spike:
                continue  # skip this update
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
