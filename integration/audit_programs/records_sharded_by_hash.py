"""Records with string ids, each rank keeping those whose hash(id) % world is its rank: under
torchrun every rank has its own PYTHONHASHSEED, so the ranks' splits disagree (some records on two
ranks, some on none). --stable: the healthy twin, zlib.crc32 of the id, the same in every process."""
import argparse
import zlib

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler


class Records(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = [f"rec-{i:05d}" for i in range(n)]
        self.x = torch.randn(n, 6, generator=g)
        self.y = (self.x[:, 0] > 0).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stable", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = Records(400)
    owner = (lambda rid: zlib.crc32(rid.encode()) % world) if args.stable else \
        (lambda rid: hash(rid) % world)
    mine = [i for i, rid in enumerate(data.ids) if owner(rid) == rank]
    loader = DataLoader(data, batch_size=20, sampler=SubsetRandomSampler(mine))
    model = DDP(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    from torch.distributed.algorithms.join import Join
    for epoch in range(2):
        with Join([model]):
            for xb, yb in loader:
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
