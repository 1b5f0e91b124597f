"""Length-bucketed batches from a batch sampler of the program's own: it shards by rank and
shuffles the buckets with seed + epoch, and defines set_epoch. The epoch loop uses a helper that
gives every loader its epoch through loader.sampler, but with DataLoader(batch_sampler=…) that is
a SequentialSampler with no set_epoch: the bucket sampler stays at epoch 0 and every epoch repeats
its order.
--set-batch-sampler-epoch: the healthy twin (the helper also tries loader.batch_sampler)."""
import argparse
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class BucketBatchSampler(Sampler):
    def __init__(self, lengths, batch_size, num_replicas, rank, seed=0):
        self.lengths, self.batch_size = lengths, batch_size
        self.num_replicas, self.rank, self.seed, self.epoch = num_replicas, rank, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        rng = random.Random(self.seed + self.epoch)
        order = sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], rng.random()))
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        rng.shuffle(batches)
        return iter(batches[self.rank::self.num_replicas])

    def __len__(self):
        return len(range(self.rank, len(self.lengths) // self.batch_size, self.num_replicas))


def set_loader_epoch(loader, epoch, batch_sampler_too):
    if hasattr(loader.sampler, "set_epoch"):
        loader.sampler.set_epoch(epoch)
    elif batch_sampler_too and hasattr(loader.batch_sampler, "set_epoch"):
        loader.batch_sampler.set_epoch(epoch)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--set-batch-sampler-epoch", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(512, 8, generator=g)
    y = (x[:, :2].sum(1) > 0).long()
    lengths = torch.randint(5, 60, (512,), generator=g).tolist()
    sampler = BucketBatchSampler(lengths, 16, dist.get_world_size(), dist.get_rank(), seed=3)
    loader = DataLoader(TensorDataset(x, y), batch_sampler=sampler)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        set_loader_epoch(loader, epoch, args.set_batch_sampler_epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
