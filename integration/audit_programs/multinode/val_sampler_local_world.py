"""Validation sharded per machine: the validation DistributedSampler is given the node's view of the
world (num_replicas=LOCAL_WORLD_SIZE, rank=LOCAL_RANK), while the correct/seen counts are
all_reduced over every rank. On one node that is the world and the accuracy is right; on two, each
node evaluates the whole set and every sample is counted twice (no-duplicates, one finding, named
by the sampler's LOCAL_RANK). With --global the sampler keeps its defaults: the healthy twin."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--global", dest="global_", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 8, generator=g)
    y = (x[:, 0] > 0).long()
    train, val = TensorDataset(x[:512], y[:512]), TensorDataset(x[512:], y[512:])
    sampler = DistributedSampler(train, seed=6)
    loader = DataLoader(train, batch_size=16, sampler=sampler)
    if args.global_:
        val_sampler = DistributedSampler(val, shuffle=False)
    else:
        val_sampler = DistributedSampler(val, num_replicas=int(os.environ["LOCAL_WORLD_SIZE"]),
                                         rank=int(os.environ["LOCAL_RANK"]), shuffle=False)
    val_loader = DataLoader(val, batch_size=16, sampler=val_sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        counts = torch.zeros(2)
        with torch.no_grad():
            for xb, yb in val_loader:
                counts += torch.tensor([(model(xb).argmax(1) == yb).sum().item(), len(yb)])
        dist.all_reduce(counts)
        if dist.get_rank() == 0:
            print("epoch %d: accuracy %.3f over %d samples" % (epoch, counts[0] / counts[1], counts[1]))
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
