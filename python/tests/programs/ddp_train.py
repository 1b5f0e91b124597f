"""A small DDP training run (gloo, env://) that prints its losses and a hash of its final
parameters on every rank: the "behaviour unchanged" test compares bare and audited runs.

--hook user: the program registers torch's allreduce_hook; --hook fp16: DDP's builtin
FP16_COMPRESS hook; --accumulate K: gradients accumulated under no_sync, reduced every K-th step;
--unused: the model's first parameters are never used (DDP with find_unused_parameters)."""
import argparse
import contextlib
import hashlib
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import all_reduce  # imported by name: must be the recorded one too
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class WithUnusedHead(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.unused = nn.Linear(10, 3)  # the first parameters, in no backward
        self.body = body

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hook", choices=["none", "user", "fp16"], default="none")
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--unused", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(300, 10, generator=g)
    dataset = TensorDataset(x, (x[:, :3].sum(1) > 0).long())
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    # Over 1 MiB of parameters (DDP's first bucket): two buckets, two allreduces per backward.
    body = nn.Sequential(nn.Linear(10, 700), nn.ReLU(), nn.Linear(700, 400), nn.ReLU(),
                         nn.Linear(400, 3))
    if args.unused:
        model = DDP(WithUnusedHead(body), bucket_cap_mb=1, find_unused_parameters=True)
    else:
        model = DDP(body, bucket_cap_mb=1)
    if args.hook == "user":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.allreduce_hook)
    elif args.hook == "fp16":
        model._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        total = torch.zeros(1)
        for step, (xb, yb) in enumerate(loader):
            reduce = (step + 1) % args.accumulate == 0
            with contextlib.nullcontext() if reduce else model.no_sync():
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
            if reduce:
                optimizer.step()
                optimizer.zero_grad()
            total += loss.detach()
        all_reduce(total)
        print(f"rank {rank} epoch {epoch} loss {total.item():.10f}", flush=True)
    h = hashlib.sha1()
    for p in model.module.parameters():
        h.update(p.detach().numpy().tobytes())
    print(f"rank {rank} params {h.hexdigest()}", flush=True)
    # The DDP module goes first, and the last loss's graph, which holds its reducer with
    # find_unused_parameters: docs/audit.md, "DDP alive at destroy_process_group".
    del model, loss
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
