"""A DDP training script with the commonest distributed data bug: it never calls
sampler.set_epoch(epoch), so every epoch repeats epoch 0's order on every rank.

    ddp-sim launch --audit -n 4 -- /usr/bin/python3 examples/python/forgot_set_epoch.py   # exit 1

It is an ordinary torch program (gloo on CPU, a synthetic dataset of 600, SGD, 3 epochs) and runs
as it is under torchrun too; the audit names the bug and where it is (README.md, docs/audit.md).
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(600, 20, generator=torch.Generator().manual_seed(1))
    dataset = TensorDataset(x, (x[:, :5].sum(1) > 0).long())
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        # the bug: sampler.set_epoch(epoch) is missing here
        for xb, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    del model  # before destroy_process_group (docs/audit.md, "DDP alive at destroy_process_group")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
