"""Bug: one rank hangs outside any collective: its dataset reads sample 100 from storage that
never answers (a stuck network mount, a lock held by a dead process), here a blocking wait.
The other ranks block in the next step's gradient allreduce until the process group's timeout
(10 s, as a CI job sets it) and raise; the hung rank is alive, and raises nothing.
"""
import datetime
import threading

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

NEVER = threading.Event()  # the storage that never answers


class Shards(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x.sum(1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if i == 100:
            NEVER.wait()  # no timeout: the read blocks forever
        return self.x[i], self.y[i]


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
    torch.manual_seed(0)
    dataset = Shards(400)
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
