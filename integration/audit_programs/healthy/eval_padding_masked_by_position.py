"""Validation on DistributedSampler(shuffle=False), which pads 402 samples to 4 x 101, with the
padded positions masked out of the metric by their place in the padded order (rank + k * world >=
N): the summed count is N, each sample scored once. The audit sees the sums (NOTE [What a metric
summed]) and passes with a note."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(802, 6)
    y = (x[:, 0] > 0).long()
    train, val = TensorDataset(x[:400], y[:400]), TensorDataset(x[400:], y[400:])
    sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=25, sampler=sampler)
    val_loader = DataLoader(val, batch_size=25, sampler=DistributedSampler(val, shuffle=False))
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        stats, seen = torch.zeros(2), 0
        with torch.no_grad():
            for xb, yb in val_loader:
                position = rank + world * (seen + torch.arange(len(yb)))
                real = (position < len(val)).float()
                seen += len(yb)
                correct = (model(xb).argmax(1) == yb).float()
                stats += torch.stack([(correct * real).sum(), real.sum()])
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch}: accuracy {stats[0] / stats[1]:.3f} on {int(stats[1])} samples")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
