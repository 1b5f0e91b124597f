"""PyTorch's DDP tutorial loop: the batch size peeked with next(iter(loader)) before each epoch."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(512, 20)
    ds = TensorDataset(x, x[:, :1] * 2)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=32, shuffle=False, sampler=sampler)
    model = DDP(nn.Linear(20, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for epoch in range(3):
        b_sz = len(next(iter(loader))[0])
        print(f"[rank {rank}] epoch {epoch} | batchsize: {b_sz} | steps: {len(loader)}")
        sampler.set_epoch(epoch)
        for source, targets in loader:
            opt.zero_grad()
            F.mse_loss(model(source), targets).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
