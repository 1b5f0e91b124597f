"""The healthy twin of sampler_local_rank.py, for 2 nodes x 4 GPUs: LOCAL_RANK only picks the
GPU; the sampler takes its rank and num_replicas from the process group (the global RANK and
WORLD_SIZE). Passes on one node and on two:
ddp-sim launch --audit --cpu --nnodes 2 -n 2 -- python3 THIS."""
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
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    g = torch.Generator().manual_seed(0)
    dataset = TensorDataset(torch.randn(512, 16, generator=g), torch.randn(512, 1, generator=g))
    sampler = DistributedSampler(dataset)  # rank and num_replicas from the process group
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
