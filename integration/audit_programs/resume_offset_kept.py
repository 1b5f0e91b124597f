"""A job resumed from a mid-epoch checkpoint with a resumable DistributedSampler: it skips the
samples each rank already trained in the interrupted epoch (its start index). The bug: the start
index is set when the checkpoint is loaded and never reset, so every later epoch skips them too
(coverage at epoch 1, named as the resume offset). With --reset the sampler clears it in set_epoch
once the resumed epoch is over: the healthy twin (its first pass is a note, not a finding)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class ResumableSampler(DistributedSampler):
    def __init__(self, dataset, reset, **kwargs):
        super().__init__(dataset, **kwargs)
        self.start_index, self.resumed_epoch, self.reset = 0, None, reset

    def resume(self, epoch, start_index):
        self.resumed_epoch, self.start_index = epoch, start_index

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        if self.reset and epoch != self.resumed_epoch:
            self.start_index = 0

    def __iter__(self):
        return iter(list(super().__iter__())[self.start_index:])

    def __len__(self):
        return self.num_samples - self.start_index


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reset", action="store_true")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(512, 8, generator=g), torch.randint(0, 2, (512,), generator=g))
    sampler = ResumableSampler(data, args.reset, seed=7)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # What the checkpoint of the interrupted job said: epoch 0, 3 batches of 16 done on each rank.
    start_epoch, batches_done = 0, 3
    sampler.resume(start_epoch, batches_done * 16)
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
