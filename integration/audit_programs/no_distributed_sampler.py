"""DDP with DataLoader(shuffle=True) and no DistributedSampler: every rank trains on every sample.

The loader's RandomSampler shuffles the whole dataset on each rank, so the ranks do not split
it: an epoch at W ranks is W epochs of the same samples. Found as disjointness on loader 0.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x.sum(1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} done")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
