"""A healthy training job whose rank 1 hangs at exit after its work, as torch 1.13 does when a DDP
module outlives destroy_process_group (pytorch/pytorch#75097: freeing the module destroys the gloo
group while holding the GIL, and a gloo thread waits for the GIL). That deadlock is a race; here
rank 1 waits on an event nobody sets once main() has returned (its DDP module freed), which is the
same from outside: its work done, its process never ending, using no CPU. The launcher ends it
(docs/ddp-sim.md, "A rank that hangs at exit") and the audit passes with a note."""
import threading

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    dist.destroy_process_group()  # the DDP module is still alive: freed when main() returns
    return rank


if __name__ == "__main__":
    if main() == 1:
        threading.Event().wait()  # the hang at exit
