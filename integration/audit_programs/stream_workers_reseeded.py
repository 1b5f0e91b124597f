"""A streaming dataset that shards its records by rank and by DataLoader worker and shuffles its
share with numpy in the workers. For reproducible runs, worker_init_fn seeds numpy with a fixed
base seed plus the worker's id: the DataLoader starts new workers every epoch, each reseeded the
same way, so every epoch streams epoch 0's order.
--seed-from-torch: the healthy twin (numpy seeded from torch.initial_seed(), which the DataLoader
draws anew for every epoch, as PyTorch's reproducibility notes show)."""
import argparse

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class RecordStream(IterableDataset):
    def __init__(self, n, rank, world):
        self.n, self.rank, self.world = n, rank, world
        g = torch.Generator().manual_seed(5)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, :2].sum(1) > 0).long()

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        ids = np.arange(self.rank * workers + worker, self.n, self.world * workers)
        np.random.shuffle(ids)
        for i in ids.tolist():
            yield self.x[i], self.y[i]


def fixed_seed(worker_id):
    np.random.seed(1234 + worker_id)


def seed_from_torch(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed-from-torch", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    stream = RecordStream(512, dist.get_rank(), dist.get_world_size())
    loader = DataLoader(stream, batch_size=16, num_workers=2,
                        worker_init_fn=seed_from_torch if args.seed_from_torch else fixed_seed)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
