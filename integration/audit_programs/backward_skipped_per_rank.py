"""A guard against useless batches: a rank whose batch holds no positive example skips
loss.backward() and the step (`continue`), on its own batch. Its forward already ran through DDP,
so the ranks' gradient allreduces fall out of step and the job hangs (collective-mismatch, named
as forwards that no backward followed). With --all-ranks the decision is all-reduced first, so
every rank skips the same batches: the healthy twin."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--all-ranks", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    y = (torch.rand(256, generator=g) < 0.1).long()  # rare positives: some batches hold none
    sampler = DistributedSampler(TensorDataset(x, y), seed=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            out = model(xb)
            useless = torch.tensor([float(yb.sum() == 0)])
            if args.all_ranks:
                dist.all_reduce(useless, op=dist.ReduceOp.MIN)  # skip only when no rank has one
            if useless.item() > 0:
                continue
            opt.zero_grad()
            F.cross_entropy(out, yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
