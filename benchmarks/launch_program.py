"""The small healthy DDP program the launch benchmark starts at W = 8 ... 256 (benchmarks/
launch_startup.py): two training sets, each with its DistributedSampler and set_epoch, DDP, and
an evaluation on rank 0 only. Healthy at every W (no padding is ever scored: rank 0 evaluates the
whole test set alone). With DDPH_BENCH_PSS=1 every rank prints its proportional set size once
all ranks have trained (a barrier first, so that every rank is alive when it is read). With
DDPH_BENCH_PHASES=1 the first and the last rank print the wall-clock time at which each phase
ended (started, process group joined, DDP built, trained, group destroyed), for
benchmarks/multi_node_scale.py."""
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    return TensorDataset(x, (x[:, :5].sum(1) > 0).long())


def own_pss_kb():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return -1


def phase(name):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if os.environ.get("DDPH_BENCH_PHASES") and rank in (0, world - 1):
        print("phase %s %.3f" % (name, time.time()), flush=True)


def main():
    phase("started")
    dist.init_process_group("gloo")
    phase("joined")
    rank = dist.get_rank()
    torch.manual_seed(0)
    train = [dataset(1024, 1), dataset(768, 2)]
    samplers = [DistributedSampler(d) for d in train]
    loaders = [DataLoader(d, batch_size=32, sampler=s) for d, s in zip(train, samplers)]
    model = DDP(torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)))
    phase("ddp")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for sampler, loader in zip(samplers, loaders):
            sampler.set_epoch(epoch)
            for x, y in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
        if rank == 0:
            with torch.no_grad():
                correct = sum((model.module(x).argmax(1) == y).sum().item()
                              for x, y in DataLoader(dataset(256, 3), batch_size=64))
            print("epoch %d: accuracy %.3f" % (epoch, correct / 256), flush=True)
    if os.environ.get("DDPH_BENCH_PSS"):
        dist.barrier()
        print("pss_kb %d" % own_pss_kb(), flush=True)
        dist.barrier()
    phase("trained")
    del model
    dist.destroy_process_group()
    phase("destroyed")


if __name__ == "__main__":
    main()
