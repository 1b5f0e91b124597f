"""Early stopping decided by rank 0 and shared with every rank by a broadcast of the flag."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    train, val = data(640, 1), data(200, 2)
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    model = DDP(nn.Linear(10, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(10):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        stop = torch.zeros(1)
        if rank == 0:
            model.eval()
            with torch.no_grad():
                acc = (model.module(val.tensors[0]).argmax(1) == val.tensors[1]).float().mean()
            stop[0] = float(epoch >= 1 and acc > 0.5)
        dist.broadcast(stop, src=0)
        if stop.item():
            break
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
