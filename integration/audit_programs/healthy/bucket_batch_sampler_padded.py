"""A length-bucketing batch sampler of the user's own (sequences of similar length batched
together, the batches dealt to the ranks in turn): 30 batches of 10 do not divide among 4 ranks,
so, as DistributedSampler pads an epoch, it pads the batch list with copies of its first batches
until every rank takes as many steps (8 each: 2 ranks end with a copy). Healthy: every sample
once per epoch besides the copies, a new order every epoch (300 samples, W = 4)."""
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset


class Sequences(Dataset):
    def __init__(self, n=300):
        g = torch.Generator().manual_seed(3)
        self.lengths = torch.randint(2, 30, (n,), generator=g).tolist()
        self.labels = torch.randint(0, 2, (n,), generator=g).tolist()

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        return torch.full((self.lengths[i],), float(self.labels[i])), self.labels[i]


def collate(items):
    width = max(len(x) for x, _ in items)
    x = torch.zeros(len(items), width)
    for k, (seq, _) in enumerate(items):
        x[k, : len(seq)] = seq
    return x.mean(1, keepdim=True), torch.tensor([y for _, y in items])


class BucketBatchSampler:
    def __init__(self, lengths, batch_size, rank, world_size, seed=0):
        self.lengths, self.batch_size = lengths, batch_size
        self.rank, self.world_size, self.seed, self.epoch = rank, world_size, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _batches(self):
        rng = random.Random(self.seed + self.epoch)
        order = sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], rng.random()))
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        rng.shuffle(batches)
        per_rank = -(-len(batches) // self.world_size)
        return batches + batches[: per_rank * self.world_size - len(batches)]

    def __iter__(self):
        return iter(self._batches()[self.rank::self.world_size])

    def __len__(self):
        return -(-len(self._batches()) // self.world_size)


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = Sequences()
    sampler = BucketBatchSampler(data.lengths, 10, dist.get_rank(), dist.get_world_size())
    loader = DataLoader(data, batch_sampler=sampler, collate_fn=collate)
    model = DDP(nn.Linear(1, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
