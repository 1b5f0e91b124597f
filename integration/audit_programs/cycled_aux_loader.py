"""Two datasets trained together, the smaller one through itertools.cycle: cycle saves the first
pass's batches and replays them, so the auxiliary data repeats one order in every later epoch and
its sampler's set_epoch calls reach nothing."""
import itertools

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    main_ds, aux_ds = dataset(800, 1), dataset(200, 2)
    main_sampler, aux_sampler = DistributedSampler(main_ds), DistributedSampler(aux_ds)
    main_loader = DataLoader(main_ds, batch_size=20, sampler=main_sampler)
    aux_loader = DataLoader(aux_ds, batch_size=10, sampler=aux_sampler)
    aux_batches = itertools.cycle(aux_loader)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        main_sampler.set_epoch(epoch)
        aux_sampler.set_epoch(epoch)
        for (xb, yb), (xa, ya) in zip(main_loader, aux_batches):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb) + 0.5 * F.cross_entropy(model(xa), ya)
            loss.backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
