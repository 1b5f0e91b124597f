"""A learning-rate finder as Lightning's Tuner.lr_find runs one: a trial DDP model trains 12 steps
of its own loader's first epoch with a growing learning rate, then its weights are restored from
the state saved before the trial, and the run proper builds its DDP model and trains 3 epochs (256
samples, W = 4). Healthy: the trial's cut epoch and unchanged end state are by design."""
import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def loader_of(ds, epoch):
    sampler = DistributedSampler(ds)
    sampler.set_epoch(epoch)
    return DataLoader(ds, batch_size=4, sampler=sampler), sampler


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    ds = TensorDataset(x, (x[:, 0] > 0).long())
    net = nn.Linear(8, 2)
    saved = copy.deepcopy(net.state_dict())
    trial = DDP(net)
    opt = torch.optim.SGD(trial.parameters(), lr=1e-4)
    loader, _ = loader_of(ds, 0)
    for step, (xb, yb) in enumerate(loader):  # the finder: 12 steps, the rate growing
        if step == 12:
            break
        for group in opt.param_groups:
            group["lr"] *= 2
        opt.zero_grad()
        F.cross_entropy(trial(xb), yb).backward()
        opt.step()
    del trial
    net.load_state_dict(saved)  # the finder restores the weights it tried
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader, sampler = loader_of(ds, 0)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
