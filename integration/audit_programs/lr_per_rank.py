"""A learning-rate sweep run as one DDP job: each rank takes its own rate from a list (one rate per
GPU), while DDP averages the gradients. The replicas part at the first step (replica-consistency,
named by the rates the ranks stepped with). With --same every rank takes the first rate: the
healthy twin."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

RATES = [0.001, 0.003, 0.01, 0.03]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--same", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 8, generator=g), torch.randint(0, 2, (256,), generator=g))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    lr = RATES[0] if args.same else RATES[rank % len(RATES)]
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
