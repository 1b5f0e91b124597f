"""An IterableDataset sharded by rank and, inside each rank, by DataLoader worker."""
import itertools

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class RecordStream(IterableDataset):
    def __init__(self, n, rank, world):
        self.n, self.rank, self.world = n, rank, world

    def records(self):
        for i in range(self.n):
            g = torch.Generator().manual_seed(i)
            x = torch.randn(6, generator=g)
            yield x, int(x[0] > 0)

    def __iter__(self):
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info else (1, 0)
        shards = self.world * workers
        return itertools.islice(self.records(), self.rank * workers + worker, None, shards)


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    loader = DataLoader(RecordStream(640, rank, world), batch_size=20, num_workers=2)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
