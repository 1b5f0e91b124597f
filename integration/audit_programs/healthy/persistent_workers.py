"""Worker processes kept across epochs (persistent_workers), set_epoch before each epoch's loop."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(400, 8)
    ds = TensorDataset(x, x[:, :2].sum(1, keepdim=True))
    sampler = DistributedSampler(ds, seed=7)
    loader = DataLoader(ds, batch_size=20, sampler=sampler, num_workers=2,
                        persistent_workers=True)
    model = DDP(nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.mse_loss(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
