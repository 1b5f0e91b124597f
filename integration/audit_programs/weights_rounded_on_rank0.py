"""An export after each epoch: rank 0 writes bfloat16 weights for a serving team by rounding the
live parameters in place (p.copy_(p.to(torch.bfloat16))), not a copy of them. Rank 0 then trains
from rounded weights while the others keep full precision: the replicas part between two epochs,
after the evaluation, where no rank took an optimizer step (replica-consistency, named as an
edit outside training).
With --copy the export rounds a deep copy: the healthy twin."""
import argparse
import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def export_bf16(module, in_place):
    target = module if in_place else copy.deepcopy(module)
    with torch.no_grad():
        for p in target.parameters():
            p.copy_(p.to(torch.bfloat16))
    return {k: v.to(torch.bfloat16) for k, v in target.state_dict().items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--copy", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    y = torch.randint(0, 2, (256,), generator=g)
    sampler = DistributedSampler(TensorDataset(x, y), seed=4)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, sampler=sampler)
    val = TensorDataset(x[:64], y[:64])
    val_loader = DataLoader(val, batch_size=16, sampler=DistributedSampler(val, shuffle=False))
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        correct = torch.zeros(2)
        with torch.no_grad():
            for xb, yb in val_loader:
                correct += torch.tensor([(model(xb).argmax(1) == yb).sum().item(), len(yb)])
        dist.all_reduce(correct)
        if dist.get_rank() == 0:
            exported = export_bf16(model.module, in_place=not args.copy)
            assert all(t.dtype == torch.bfloat16 for t in exported.values())
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
