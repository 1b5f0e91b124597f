"""After validation each rank gathers the samples it misclassified, to log them on rank 0:
dist.all_gather of a tensor whose length is each rank's own count. all_gather needs one shape on
every rank; Gloo aborts (or NCCL hangs). --padded: the healthy twin (sizes gathered first, each
tensor padded to the largest, cut after)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def gather_rows(rows, padded):
    world = dist.get_world_size()
    if not padded:
        out = [torch.empty_like(rows) for _ in range(world)]
        dist.all_gather(out, rows)
        return torch.cat(out)
    n = torch.tensor([rows.shape[0]])
    sizes = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(sizes, n)
    longest = int(max(s.item() for s in sizes))
    full = torch.zeros(longest, rows.shape[1])
    full[: rows.shape[0]] = rows
    out = [torch.empty_like(full) for _ in range(world)]
    dist.all_gather(out, full)
    return torch.cat([o[: int(s.item())] for o, s in zip(out, sizes)])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--padded", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(400, 5)
    val = TensorDataset(x, (x[:, 0] + 0.5 * x[:, 1] > 0).long())
    model = DDP(nn.Linear(5, 2))
    wrong = []
    with torch.no_grad():
        for xb, yb in DataLoader(val, batch_size=50, sampler=DistributedSampler(val, shuffle=False)):
            miss = model.module(xb).argmax(1) != yb
            wrong.append(xb[miss])
    rows = gather_rows(torch.cat(wrong), args.padded)
    if dist.get_rank() == 0:
        print(f"{rows.shape[0]} misclassified validation samples")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
