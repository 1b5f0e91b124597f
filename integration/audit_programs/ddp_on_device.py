"""A DDP loop on a device: CUDA with NCCL (one GPU per rank, by LOCAL_RANK) or the CPU with gloo.

For scripts/gpu-check.sh, which audits it on the GPUs: healthy as written (DistributedSampler,
set_epoch, DDP over 512 samples, 3 epochs); with --no-set-epoch every epoch repeats epoch 0's
order, which the audit names `reshuffle`. `--device cpu` runs the same loop on gloo, as the tests
on a CPU-only machine do.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--no-set-epoch", action="store_true")
    args = parser.parse_args()
    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 32, generator=g)
    dataset = TensorDataset(x, (x[:, :8].sum(1) > 0).long())
    sampler = DistributedSampler(dataset, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
    model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        if not args.no_set_epoch:
            sampler.set_epoch(epoch)
        total = torch.zeros((), device=device)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {total.item() / len(loader) / dist.get_world_size():.6f}",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
