"""A DDP program written for 2 nodes x 2 GPUs that picks its GPU with the global rank, as
single-node scripts do: torch.cuda.set_device(rank). On one node RANK is LOCAL_RANK and it runs; on
the second node ranks 2 and 3 ask for devices 2 and 3 of a node with 2 (CUDA's "invalid device
ordinal"). Runs on a laptop unmodified: ddp-sim launch --audit --cpu --nnodes 2 -n 2 -- python3 THIS.
Healthy twin: sampler_global_rank.py (LOCAL_RANK for the device)."""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", rank)
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    dataset = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DDP(torch.nn.Linear(8, 2).to(device), device_ids=[rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb.to(device)), yb.to(device)).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
