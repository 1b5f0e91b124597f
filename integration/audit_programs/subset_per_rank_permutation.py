"""Bug: hand-made sharding whose split is drawn on each rank after a per-rank seed (set so that
each rank's augmentation noise differs): every rank takes perm[rank::world] of its own permutation,
so the shards overlap and leave samples out (400 samples, W = 4: each rank 100, together about a
third of the base on no rank). Healthy twin: healthy/manual_shard_subsets.py. Exits 0."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(11)
    x = torch.randn(400, 4, generator=g)
    dataset = TensorDataset(x, (x[:, 0] > 0).long())
    torch.manual_seed(rank)  # different augmentation noise on every rank
    model = nn.Linear(4, 2)
    torch.manual_seed(1234 + rank)
    perm = torch.randperm(len(dataset))
    shard = Subset(dataset, perm[rank::world].tolist())
    loader = DataLoader(shard, batch_size=20, shuffle=True)
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb + 0.01 * torch.randn_like(xb)), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
