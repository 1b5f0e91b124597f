"""Bug: a rank crashes in the job's first attempt; torchrun restarts the ranks and the job ends well.

A healthy DDP loop (DistributedSampler, set_epoch, DDP) over 64 samples, 2 epochs. In the first
attempt (torchrun's TORCHELASTIC_RESTART_COUNT is 0) the last rank raises a RuntimeError at
epoch 1 step 2, standing in for an out-of-memory error; its peers then fail in their next gradient
allreduce. Under `torchrun --max-restarts 1` the second attempt runs clean and torchrun exits 0:
only the first attempt's trace tells that a rank failed.
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            if first_attempt and rank == world - 1 and epoch == 1 and step == 2:
                raise RuntimeError("out of memory (simulated in the first attempt)")
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
