"""SWA bookkeeping done "on the main process": the averaged model is updated under
`if rank == 0:`, then every rank evaluates it on its shard of the validation set and the counts
are summed. Ranks 1-3 evaluate the weights the AveragedModel was built with.
--every-rank: the healthy twin (every rank updates it; DDP keeps the replicas equal)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.swa_utils import SWALR, AveragedModel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--every-rank", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(640, 12)
    y = (x[:, :4].sum(1) > 0).long()
    train, val = TensorDataset(x[:512], y[:512]), TensorDataset(x[512:], y[512:])
    train_sampler = DistributedSampler(train, shuffle=True)
    train_loader = DataLoader(train, batch_size=32, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=32, sampler=DistributedSampler(val, shuffle=False))
    net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    model = DDP(net)
    swa_model = AveragedModel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    swa_scheduler = SWALR(opt, swa_lr=0.02)
    for epoch in range(4):
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        if epoch >= 1:
            swa_scheduler.step()
            if args.every_rank or rank == 0:
                swa_model.update_parameters(model.module)
    correct = torch.zeros(2)
    swa_model.eval()
    with torch.no_grad():
        for xb, yb in val_loader:
            correct[0] += (swa_model(xb).argmax(1) == yb).sum()
            correct[1] += len(yb)
    dist.all_reduce(correct)
    if rank == 0:
        print(f"SWA accuracy {correct[0] / correct[1]:.3f}")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
