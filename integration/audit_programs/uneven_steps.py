"""Bug: uneven inputs: rank 0 runs one more DDP step per epoch than the other ranks.

The dataset (N = 193 at W=4) is split by hand, indices[rank::W], with a DataLoader over a Subset
and no padding: rank 0 gets 49 samples (4 batches of 16), the others 48 (3 batches). The extra
steps' gradient allreduces first pair with the next epoch's steps of the other ranks; after their
last step ranks 1..3 exit normally and rank 0 is left in an allreduce nobody joins: with gloo it
fails ("Connection closed by peer", exit 1) or hangs. Run it under a launcher timeout.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    n = 16 * 3 * world + 1
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 20, generator=g)
    dataset = TensorDataset(x, (x[:, :5].sum(1) > 0).long())
    shard = Subset(dataset, list(range(n))[rank::world])  # no padding: rank 0 has one more sample
    loader = DataLoader(shard, batch_size=16, shuffle=True)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch}: {len(loader)} steps, loss {total / len(loader):.6f}",
              flush=True)
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
