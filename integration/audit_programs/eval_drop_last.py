"""Distributed evaluation with drop_last=True in the evaluation sampler.

402 validation samples at W = 4: DistributedSampler(drop_last=True) gives every rank 100 and the
last 2 are never scored, so the reported accuracy is over 400 samples. Found as coverage of the
evaluation pass.
"""
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
    torch.manual_seed(0)
    train, val = data(480, 1), data(402, 2)
    train_sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=30, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=50,
                            sampler=DistributedSampler(val, shuffle=False, drop_last=True))
    model = DDP(nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_sampler.set_epoch(epoch)
        model.train()
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        correct, seen = torch.zeros(1), torch.zeros(1)
        with torch.no_grad():
            for xb, yb in val_loader:
                correct += (model(xb).argmax(1) == yb).sum()
                seen += len(yb)
        dist.all_reduce(correct)
        dist.all_reduce(seen)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: accuracy {(correct / seen).item():.3f} over {int(seen.item())}")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
