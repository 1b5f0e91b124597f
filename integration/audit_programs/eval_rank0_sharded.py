"""Bug: evaluation on rank 0 only, over a validation loader sharded with DistributedSampler.

The validation loader is built the way the training loader is, with a DistributedSampler; the
evaluation then runs under `if rank == 0`, through model.module (no collective, so nothing hangs).
Rank 0 reads only its own shard: a third of the validation set on 3 ranks, and the accuracy it
prints is over that third. The program as a user writes it.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(600, 16, generator=g)
    y = (x.sum(1) > 0).long()
    train = TensorDataset(x[:480], y[:480])
    val = TensorDataset(x[480:], y[480:])
    train_sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=32, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=64, sampler=DistributedSampler(val, shuffle=False))
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        if rank == 0:
            correct = total = 0
            with torch.no_grad():
                for xb, yb in val_loader:
                    correct += (model.module(xb).argmax(1) == yb).sum().item()
                    total += len(yb)
            print(f"epoch {epoch}: val acc {correct / total:.3f} over {total} samples", flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
