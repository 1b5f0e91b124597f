"""A job that is stopped mid-epoch and resumed from its checkpoint, as preemptible jobs are: the first
job (--stop-after K) trains K steps of epoch 1 after a whole epoch 0, saves model, optimizer, epoch and
step, and exits; the second (--resume) loads them and finishes the run (3 epochs, 600 samples, W = 4:
150 a rank, 10 steps of 15 an epoch).

How the second job reaches the checkpoint's step:
  --skip iterate   (default) iterate the epoch's loader and skip the first `step` batches (healthy)
  --skip sampler   a sampler that starts the rank's shard at step x batch size (healthy)
Bugs of the resume path:
  --no-set-epoch   the resume path forgets sampler.set_epoch(epoch) for the interrupted epoch: its rest
                   is drawn from epoch 0's order (300 samples trained twice, 300 never, by plain torchrun)
  --restart-epoch  the interrupted epoch starts again from its first batch although the checkpoint
                   already holds its first K steps: those are trained twice
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BATCH = 15


class ResumableSampler(DistributedSampler):
    """DistributedSampler that skips the first `start` indices of its shard (for one epoch)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.start = 0

    def __iter__(self):
        indices = list(super().__iter__())[self.start:]
        self.start = 0
        return iter(indices)

    def __len__(self):
        return self.num_samples - self.start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--stop-after", type=int, default=None, help="steps of epoch 1 before stopping")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--skip", choices=["iterate", "sampler"], default="iterate")
    ap.add_argument("--no-set-epoch", action="store_true")
    ap.add_argument("--restart-epoch", action="store_true")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(600, 8)
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = (ResumableSampler if args.skip == "sampler" else DistributedSampler)(ds, shuffle=True)
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler)
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    start_epoch, start_step = 0, 0
    if args.resume:
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start_epoch, start_step = state["epoch"], state["step"]
        if args.restart_epoch:
            start_step = 0
    model = DDP(model)
    for epoch in range(start_epoch, 3):
        resuming = args.resume and epoch == start_epoch
        if not (resuming and args.no_set_epoch):
            sampler.set_epoch(epoch)
        skip = start_step if resuming else 0
        if resuming and args.skip == "sampler":
            sampler.start = skip * BATCH
            skip = 0
        for step, (xb, yb) in enumerate(loader):
            if step < skip:
                continue
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            done = step + 1 + (start_step if resuming and args.skip == "sampler" else 0)
            if args.stop_after is not None and epoch == 1 and done == args.stop_after:
                if dist.get_rank() == 0:
                    tmp = args.checkpoint + ".tmp"
                    torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                                "epoch": epoch, "step": done}, tmp)
                    os.replace(tmp, args.checkpoint)
                dist.barrier()
                del model
                dist.destroy_process_group()
                return
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
