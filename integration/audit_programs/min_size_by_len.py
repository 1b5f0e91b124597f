"""Bug: two loaders trained together for len() of the shorter one, as Lightning's
CombinedLoader(mode="min_size") drives them (next() on each, never to StopIteration): the longer
loader's rest is never drawn, the same every epoch (labelled 320, unlabelled 1280 samples, W = 4:
5 of the unlabelled loader's 20 batches a rank are trained). Exits 0."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x, u = torch.randn(320, 8), torch.randn(1280, 8)
    labelled = TensorDataset(x, (x[:, 0] > 0).long())
    unlabelled = TensorDataset(u)
    ls, us = DistributedSampler(labelled), DistributedSampler(unlabelled)
    labelled_loader = DataLoader(labelled, batch_size=16, sampler=ls)
    unlabelled_loader = DataLoader(unlabelled, batch_size=16, sampler=us)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        ls.set_epoch(epoch)
        us.set_epoch(epoch)
        li, ui = iter(labelled_loader), iter(unlabelled_loader)
        for _ in range(min(len(labelled_loader), len(unlabelled_loader))):
            xb, yb = next(li)
            (ub,) = next(ui)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb) + model(ub).softmax(1).max(1).values.mean() * 0
            loss.backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
