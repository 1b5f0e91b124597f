"""A batch sampler of the program's own that groups a DistributedSampler's indices into
length-sorted batches, keeping the DistributedSampler as `self.base`. The loop calls
batch_sampler.set_epoch(epoch), which this class defines but does not forward, so the
DistributedSampler never gets an epoch: every epoch repeats epoch 0's batches.
--forward: the healthy twin (set_epoch forwarded to the held sampler)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset


class SortedBatches(Sampler):
    def __init__(self, base, lengths, batch_size, forward):
        self.base, self.lengths, self.batch_size, self.forward = base, lengths, batch_size, forward
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch
        if self.forward:
            self.base.set_epoch(epoch)

    def __iter__(self):
        chunk = self.batch_size * 4
        indices = list(self.base)
        for start in range(0, len(indices), chunk):
            group = sorted(indices[start:start + chunk], key=lambda i: self.lengths[i])
            for b in range(0, len(group), self.batch_size):
                yield group[b:b + self.batch_size]

    def __len__(self):
        return -(-len(self.base) // self.batch_size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--forward", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(2)
    x = torch.randn(512, 8, generator=g)
    lengths = torch.randint(4, 64, (512,), generator=g).tolist()
    data = TensorDataset(x, (x[:, 0] > 0).long())
    batches = SortedBatches(DistributedSampler(data, seed=7), lengths, 16, args.forward)
    loader = DataLoader(data, batch_sampler=batches)
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        batches.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
