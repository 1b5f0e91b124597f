"""A train/validation random_split made after a per-rank seed.

The program seeds each rank differently (for its augmentation), then splits the dataset with
random_split: every rank gets another training Subset, so the DistributedSampler's shards do not
split one dataset, and samples one rank trains on are validation samples on another. Found as
coverage on the training loader, naming the split.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, random_split


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, 8, generator=g)
    full = TensorDataset(x, (x[:, 0] > 0).long())
    torch.manual_seed(100 + rank)  # "different augmentation on every rank"
    train, val = random_split(full, [800, 200])
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=50, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            xb = xb + 0.01 * torch.randn_like(xb)  # the per-rank augmentation
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
