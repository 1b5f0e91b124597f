"""A training loader with DataLoader(drop_last=True) over DistributedSampler(shuffle=False): each
rank's last partial batch is dropped, and without shuffling it holds the same samples every epoch,
so they are trained in none (1000 samples, W = 4: 250 a rank, 7 batches of 32 and 26 dropped)."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(1000, 8)
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=32, sampler=sampler, drop_last=True)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
