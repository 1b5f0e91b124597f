"""A length-bucketing sampler that reads the world from torch.distributed when it is ready and
falls back to a single process otherwise, built by a data module that runs before
init_process_group: every rank gets num_replicas 1, rank 0, and trains on the whole dataset.
--after-init: the healthy twin (the data is built after init_process_group)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class BucketSampler(Sampler):
    def __init__(self, lengths, batch_size, seed=0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0
        ready = dist.is_available() and dist.is_initialized()
        self.num_replicas = dist.get_world_size() if ready else 1
        self.rank = dist.get_rank() if ready else 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = sorted(range(len(self.lengths)), key=lambda i: self.lengths[i])
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
        for b in batches[self.rank::self.num_replicas]:
            yield from b

    def __len__(self):
        return len(range(self.rank, -(-len(self.lengths) // self.batch_size), self.num_replicas)) * self.batch_size


def build_data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 8, generator=g)
    lengths = torch.randint(5, 50, (512,), generator=g).tolist()
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = BucketSampler(lengths, batch_size=16)
    return sampler, DataLoader(data, batch_size=16, sampler=sampler)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--after-init", action="store_true")
    args = parser.parse_args()
    if not args.after_init:
        sampler, loader = build_data()
    dist.init_process_group("gloo")
    if args.after_init:
        sampler, loader = build_data()
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
