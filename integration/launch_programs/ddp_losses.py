"""A small DDP program in the shape users write it (a __main__ guard, DataLoader worker
processes, its own signal handler and atexit): fork_server_test runs it with forked and with
exec'd ranks and compares what it prints and what the audit recorded."""
import atexit
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def on_usr1(signum, frame):
    print("rank %s handled %s" % (os.environ["RANK"], signal.Signals(signum).name), flush=True)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(256, 8, generator=g), torch.randn(256, 1, generator=g))
    sampler = DistributedSampler(data, seed=3)
    loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=2)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        print("rank %d epoch %d loss %r" % (rank, epoch, total), flush=True)
    signal.signal(signal.SIGUSR1, on_usr1)
    os.kill(os.getpid(), signal.SIGUSR1)
    atexit.register(print, "rank %d atexit" % rank)
    del model  # NOTE [DDP alive at destroy_process_group] (docs/audit.md)
    dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
