"""Train, keep the best epoch's weights, then fine-tune from them: a cluster script whose checkpoint
folder is on each node's local disk (CKPT_ROOT/node<GROUP_RANK>, as /scratch or /local_ssd is per
node). The bug: the best checkpoint is written under `if rank == 0:` (global rank 0, on node 0
only), and stage 2 loads it `if os.path.exists(best_path):` -- so node 0's ranks go back to the
best epoch while node 1's ranks fine-tune their current weights: the replicas part
(replica-consistency, named as a checkpoint found on some nodes only). On one node every rank
finds the file and the program is right. --per-node-writer writes it on each node's local rank 0:
the healthy twin. Runs on a laptop: ddp-sim launch --audit --cpu --nnodes 2 -n 2 -- python3 THIS
--ckpt-root DIR."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def evaluate(model, loader):
    model.eval()
    correct = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            correct += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
    dist.all_reduce(correct)
    model.train()
    return (correct[0] / correct[1]).item()


def train_epoch(model, loader, sampler, optimizer, epoch):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-root", required=True)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--per-node-writer", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    ckpt_dir = os.path.join(args.ckpt_root, "node%s" % os.environ.get("GROUP_RANK", "0"))
    os.makedirs(ckpt_dir, exist_ok=True)
    best_path = os.path.join(ckpt_dir, "best.pt")

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2304, 8, generator=g)
    x[:, 0] += torch.sign(x[:, 0])  # two well separated classes: the accuracy peaks early
    y = (x[:, 0] > 0).long()
    train, val = TensorDataset(x[:2048], y[:2048]), TensorDataset(x[2048:], y[2048:])
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    val_loader = DataLoader(val, batch_size=32, sampler=DistributedSampler(val, shuffle=False))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    best = -1.0
    for epoch in range(args.epochs):
        train_epoch(model, loader, sampler, optimizer, epoch)
        acc = evaluate(model, val_loader)
        writer = local_rank == 0 if args.per_node_writer else rank == 0
        if acc > best:
            best = acc
            if writer:
                torch.save(model.module.state_dict(), best_path)
        dist.barrier()

    # Stage 2: fine-tune from the best epoch's weights at a lower rate.
    if os.path.exists(best_path):
        model.module.load_state_dict(torch.load(best_path))
    for group in optimizer.param_groups:
        group["lr"] = 0.05
    train_epoch(model, loader, sampler, optimizer, args.epochs)
    if rank == 0:
        print("best val acc %.4f, after fine-tuning %.4f" % (best, evaluate(model, val_loader)))
    else:
        evaluate(model, val_loader)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
