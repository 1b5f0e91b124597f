"""A random-search trial: rank 0 draws the trial's hyper-parameters from an unseeded RNG and sends
them to the others with broadcast_object_list -- into a list display, `[cfg]`, which the call fills
on ranks 1-3 and nobody keeps. Each rank trains with its own draw while DDP averages the gradients:
the replicas part at the first step (replica-consistency, named by the rates and the broadcast's
line). With --keep the list is kept and read back (cfg = holder[0]): the healthy twin."""
import argparse
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def draw_trial(rng):
    return {"lr": 10 ** rng.uniform(-3, -1), "momentum": rng.choice([0.0, 0.9])}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    cfg = draw_trial(random.Random())
    if args.keep:
        holder = [cfg]
        dist.broadcast_object_list(holder, src=0)
        cfg = holder[0]
    else:
        dist.broadcast_object_list([cfg], src=0)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(256, 8, generator=g), torch.randint(0, 2, (256,), generator=g))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"])
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
