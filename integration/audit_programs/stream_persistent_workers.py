"""A streaming dataset that shards by rank and by worker and reshuffles through set_epoch(), read
by a DataLoader that keeps its workers alive between epochs (persistent_workers=True, to avoid
re-spawning them). The workers keep the copy of the dataset they got at the first epoch, so
set_epoch on the main process's dataset never reaches them: every epoch streams epoch 0's order.
--fresh-workers: the healthy twin (persistent_workers=False: the workers take the dataset, and
its epoch, anew at every epoch)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class ShuffledShards(IterableDataset):
    def __init__(self, n, rank, world):
        self.n, self.rank, self.world, self.epoch = n, rank, world, 0
        g = torch.Generator().manual_seed(5)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, :2].sum(1) > 0).long()

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.epoch))
        order = order[self.rank::self.world]
        info = get_worker_info()
        if info is not None:
            order = order[info.id::info.num_workers]
        for i in order.tolist():
            yield self.x[i], self.y[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fresh-workers", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    stream = ShuffledShards(512, dist.get_rank(), dist.get_world_size())
    loader = DataLoader(stream, batch_size=16, num_workers=2,
                        persistent_workers=not args.fresh_workers)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        stream.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
