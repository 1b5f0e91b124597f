"""Healthy: a GPU program as users write one for a conv net, torchrun style: NCCL, set_device,
a model with BatchNorm converted to SyncBatchNorm, DDP(device_ids=...), AMP with a GradScaler,
evaluation on every rank with the sums all_reduced. Run unmodified under `ddp-sim launch --cpu`."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def net():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(local_rank)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(320, 3, 8, 8, generator=g), torch.randint(0, 10, (320,), generator=g)
    train, val = TensorDataset(x[:256], y[:256]), TensorDataset(x[256:], y[256:])
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=16, sampler=sampler, pin_memory=True)
    val_loader = DataLoader(val, batch_size=16, sampler=DistributedSampler(val, shuffle=False))
    torch.manual_seed(0)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(net()).cuda(local_rank)
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            xb, yb = xb.cuda(local_rank, non_blocking=True), yb.cuda(local_rank, non_blocking=True)
            opt.zero_grad()
            with torch.cuda.amp.autocast():
                loss = F.cross_entropy(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        model.eval()
        sums = torch.zeros(2, device="cuda")
        with torch.no_grad():
            for xb, yb in val_loader:
                sums[0] += (model(xb.cuda()).argmax(1) == yb.cuda()).sum()
                sums[1] += len(yb)
        dist.all_reduce(sums)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f} val acc {(sums[0] / sums[1]).item():.3f}",
                  flush=True)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
