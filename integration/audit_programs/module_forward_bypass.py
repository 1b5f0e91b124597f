"""Bug: the training loop calls the model through model.module (a habit from code that saves
model.module.state_dict()), so DDP's forward never runs, no backward all-reduces a gradient, and
each rank trains its own model on its own shard (448 samples, W = 4). Exits 0."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(448, 6)
    ds = TensorDataset(x, x.sum(1, keepdim=True))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.mse_loss(model.module(xb), yb).backward()
            opt.step()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "/dev/null")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
