"""A GPU DDP program that starts its own ranks, as PyTorch's multigpu.py tutorial does:
torch.multiprocessing.spawn of one rank per GPU (torch.cuda.device_count()), each joining an nccl
group with MASTER_ADDR/MASTER_PORT set in the program, its model on its GPU. Runs unmodified under
`ddp-sim launch --cpu -n 1 --gpus N`. Healthy; --forget-set-epoch: every epoch repeats epoch 0.
"""
import argparse
import os

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ.setdefault("MASTER_PORT", "12355")
    init_process_group(backend="nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)


def main(rank, world_size, total_epochs, set_epoch):
    ddp_setup(rank, world_size)
    g = torch.Generator().manual_seed(0)
    dataset = TensorDataset(torch.rand(240, 20, generator=g), torch.rand(240, 1, generator=g))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=20, pin_memory=True, shuffle=False, sampler=sampler)
    model = DDP(torch.nn.Linear(20, 1).to(rank), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for epoch in range(total_epochs):
        if set_epoch:
            sampler.set_epoch(epoch)
        for source, targets in loader:
            source, targets = source.to(rank), targets.to(rank)
            optimizer.zero_grad()
            F.mse_loss(model(source), targets).backward()
            optimizer.step()
        if rank == 0:
            print(f"[GPU{rank}] Epoch {epoch} | Steps: {len(loader)}")
    del model  # the DDP module goes first (torch 1.13 can hang at exit otherwise: docs/audit.md)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("total_epochs", type=int)
    parser.add_argument("--forget-set-epoch", action="store_true")
    args = parser.parse_args()
    world_size = torch.cuda.device_count()
    mp.spawn(main, args=(world_size, args.total_epochs, not args.forget_set_epoch),
             nprocs=world_size)
