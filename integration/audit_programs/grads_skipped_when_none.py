"""Hand-written gradient averaging that skips parameters without a gradient: an auxiliary head
runs only on batches that hold a "hard" sample (label 2), so on a rank whose batch has none the
head's .grad is None and the loop all-reduces one tensor fewer: the ranks' all_reduces pair
unrelated gradients, and Gloo aborts on the size mismatch.
--zeros: the healthy twin (a zero gradient for a parameter that has none)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)
        self.hard = nn.Linear(32, 3)

    def forward(self, x, y):
        h = self.body(x)
        loss = F.cross_entropy(self.head(h), y)
        mask = y == 2
        if mask.any():
            loss = loss + F.cross_entropy(self.hard(h[mask]), y[mask])
        return loss


def average_gradients(model, zeros):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is None:
            if not zeros:
                continue
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)
        p.grad /= world


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zeros", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = Net()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(256, 8, generator=g)
    y = torch.where(torch.rand(256, generator=g) < 0.05, 2, (x[:, 0] > 0).long())
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, seed=0)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad(set_to_none=True)
            model(xb, yb).backward()
            average_gradients(model, args.zeros)
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
