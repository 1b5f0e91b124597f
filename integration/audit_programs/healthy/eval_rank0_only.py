"""Distributed training, evaluation of the whole validation set on rank 0 alone."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long())


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    train, val = data(480, 1), data(402, 2)
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=30, sampler=sampler)
    val_loader = DataLoader(val, batch_size=64)
    model = DDP(nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        if rank == 0:
            model.eval()
            with torch.no_grad():
                correct = sum((model.module(xb).argmax(1) == yb).sum().item()
                              for xb, yb in val_loader)
            print(f"epoch {epoch}: accuracy {correct / len(val):.3f}")
        dist.barrier()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
