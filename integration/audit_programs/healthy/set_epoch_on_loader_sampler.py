"""set_epoch called on the loader's own sampler (loader.sampler), the sampler made inline."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(800, 8, generator=g)
    dataset = TensorDataset(x, (x[:, 1] > 0).long())
    loader = DataLoader(dataset, batch_size=40, sampler=DistributedSampler(dataset, shuffle=True))
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
