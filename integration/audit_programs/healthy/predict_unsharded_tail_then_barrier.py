"""Prediction over a shard without padding, as Lightning's predict loop deals it
(UnrepeatedDistributedSampler-style indices[rank::world]): 1002 samples on 4 ranks give ranks 0 and 1
6 batches of 50 (the last of 1) and ranks 2 and 3 5, no collective between batches, then every rank
writes its predictions and meets at a barrier. Healthy: nothing waits on the uneven batch counts."""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Subset, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(1002, 8)
    data = TensorDataset(x, torch.arange(len(x)))
    shard = list(range(len(data)))[rank::world]
    loader = DataLoader(Subset(data, shard), batch_size=50)
    model = nn.Linear(8, 2).eval()
    predictions = []
    with torch.no_grad():
        for xb, idx in loader:
            predictions.append((idx, model(xb).argmax(1)))
    dist.barrier()  # every rank's predictions written before rank 0 gathers the files
    if rank == 0:
        print(f"rank 0 predicted {sum(len(i) for i, _ in predictions)} samples")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
