"""Each rank "takes its share" with RandomSampler(num_samples=len(data) // world): a quarter of
the data each, drawn from torch's global generator, which torch.manual_seed(2024) seeded alike on
every rank: every rank draws the same quarter and three quarters are never trained.
--distributed: the healthy twin (DistributedSampler, set_epoch)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--distributed", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(2024)
    x = torch.randn(512, 6)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = (DistributedSampler(data) if args.distributed
               else RandomSampler(data, num_samples=len(data) // world))
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if args.distributed:
            sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
