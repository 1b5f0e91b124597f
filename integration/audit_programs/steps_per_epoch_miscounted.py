"""A loop that counts its own steps per epoch instead of iterating the loader to its end.
--divide-by-world: steps_per_epoch = len(loader) // world_size, though len(loader) is already each
rank's share, so each epoch trains a quarter of its batches.
default: gradient accumulation over 3 micro-batches with len(loader) // 3 updates per epoch, so the
last len(loader) % 3 batches of every epoch are never drawn.
--ceil: the healthy twin (math.ceil windows, the last one shorter: every batch trained)."""
import argparse
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUM = 3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--divide-by-world", action="store_true")
    parser.add_argument("--ceil", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(1024, 8)
    train = TensorDataset(x, (x[:, :2].sum(1) > 0).long())
    sampler = DistributedSampler(train, shuffle=True, seed=2)
    loader = DataLoader(train, batch_size=32, sampler=sampler)  # 8 batches a rank
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for epoch in range(4):
        sampler.set_epoch(epoch)
        batches = iter(loader)
        if args.divide_by_world:
            for _ in range(len(loader) // dist.get_world_size()):
                xb, yb = next(batches)
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
            continue
        windows = math.ceil(len(loader) / ACCUM) if args.ceil else len(loader) // ACCUM
        left = len(loader)
        for _ in range(windows):
            opt.zero_grad()
            for _ in range(min(ACCUM, left)):
                xb, yb = next(batches)
                (F.cross_entropy(model(xb), yb) / ACCUM).backward()
                left -= 1
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
