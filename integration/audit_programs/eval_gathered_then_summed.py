"""Evaluation that gathers every rank's predictions (all_gather: each rank then holds all of
them), scores the gathered predictions, and then sums the error and sample counts across the
ranks with all_reduce, as a metric logged with sync_dist=True, reduce_fx="sum" does: every sample
is counted once per rank (the printed count is 4 x the validation set).
--sum-own: the healthy twin (each rank sums the counts of its own predictions)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def evaluate(model, loader, sum_own):
    model.eval()
    preds, targets = [], []
    with torch.no_grad():
        for x, y in loader:
            preds.append(model(x).argmax(1))
            targets.append(y)
    preds, targets = torch.cat(preds), torch.cat(targets)
    if sum_own:
        counts = torch.tensor([float((preds != targets).sum()), float(preds.numel())])
    else:
        world = dist.get_world_size()
        all_preds = [torch.empty_like(preds) for _ in range(world)]
        all_targets = [torch.empty_like(targets) for _ in range(world)]
        dist.all_gather(all_preds, preds)
        dist.all_gather(all_targets, targets)
        preds, targets = torch.cat(all_preds), torch.cat(all_targets)
        counts = torch.tensor([float((preds != targets).sum()), float(preds.numel())])
    dist.all_reduce(counts)
    model.train()
    return counts.tolist()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sum-own", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1000, 8, generator=g)
    y = (x[:, :2].sum(1) > 0).long()
    train, val = TensorDataset(x[:600], y[:600]), TensorDataset(x[600:], y[600:])
    train_sampler = DistributedSampler(train, seed=1)
    train_loader = DataLoader(train, batch_size=30, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=50, sampler=DistributedSampler(val, shuffle=False))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        errors, seen = evaluate(model, val_loader, args.sum_own)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {int(errors)} errors in {int(seen)} validation samples")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
