"""One rank that leaves each piece of evidence the audit's causes are chosen from (test_evidence)."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import (ConcatDataset, DataLoader, DistributedSampler, IterableDataset, TensorDataset,
                              WeightedRandomSampler)


class Stream(IterableDataset):
    def __iter__(self):
        return (torch.full((3,), float(i)) for i in range(8))


def late_set_epoch(workers):
    ds = TensorDataset(torch.arange(16.0))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=workers)
    for epoch in range(2):
        it = iter(loader)
        sampler.set_epoch(epoch + 10)  # after iter(): in time without workers only
        for _ in it:
            pass


def main():
    dist.init_process_group("gloo")
    late_set_epoch(0)
    late_set_epoch(2)
    weighted = WeightedRandomSampler(torch.ones(10), num_samples=5)
    for _ in DataLoader(TensorDataset(torch.arange(10.0)), sampler=weighted, batch_size=5):
        pass
    for _ in DataLoader(Stream(), batch_size=4):
        pass
    news = TensorDataset(torch.arange(6.0))
    news.name = "news"
    for _ in DataLoader(ConcatDataset([news, TensorDataset(torch.arange(4.0))]), batch_size=5):
        pass
    model = DDP(nn.Linear(3, 1))
    with model.no_sync():
        model(torch.ones(2, 3)).sum().backward()
    model(torch.ones(2, 3)).sum().backward()
    del model
    dist.destroy_process_group()
    raise ValueError("the end " + "of the evidence")


if __name__ == "__main__":
    main()
