"""A DDP program written for 2 nodes x 4 GPUs (torchrun --nnodes 2 --nproc-per-node 4, or srun
with one task per GPU), as cluster scripts often write it: the local rank picks the GPU, and, the
bug, it also shards the data: DistributedSampler(dataset, rank=local_rank). On one node LOCAL_RANK
is RANK, so the program is right there; on two, local rank 0 of each node draws the same shard
(with the default num_replicas, half the dataset is never drawn). --replicas-per-node also passes
num_replicas=torch.cuda.device_count() (each node then trains on the same half of the data).
--node-plus-local passes rank=GROUP_RANK + LOCAL_RANK instead (the factor LOCAL_WORLD_SIZE
forgotten: two ranks share a rank on two nodes of two).
Runs on a laptop unmodified: ddp-sim launch --audit --cpu --nnodes 2 -n 2 -- python3 THIS.
Healthy twin: sampler_global_rank.py."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--replicas-per-node", action="store_true")
    parser.add_argument("--node-plus-local", action="store_true")
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    g = torch.Generator().manual_seed(0)
    dataset = TensorDataset(torch.randn(512, 16, generator=g), torch.randn(512, 1, generator=g))
    if args.replicas_per_node:
        sampler = DistributedSampler(dataset, num_replicas=torch.cuda.device_count(), rank=local_rank)
    elif args.node_plus_local:
        sampler = DistributedSampler(dataset, rank=int(os.environ["GROUP_RANK"]) + local_rank)
    else:
        sampler = DistributedSampler(dataset, rank=local_rank)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, pin_memory=True)

    model = DDP(torch.nn.Linear(16, 1).to(device), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} done on {len(loader)} batches a rank")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
