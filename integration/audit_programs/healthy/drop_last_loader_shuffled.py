"""DataLoader(drop_last=True) over a shuffled DistributedSampler with set_epoch: each epoch drops
other samples, so over the run every sample is trained. --max-steps K ends the run after K
optimizer steps, inside an epoch (a step budget)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(1000, 8)
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(ds, shuffle=True, seed=3)
    loader = DataLoader(ds, batch_size=32, sampler=sampler, drop_last=True)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            steps += 1
            if steps == args.max_steps:
                break
        if steps == args.max_steps:
            break
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
