"""Early stopping decided on rank 0 alone.

Rank 0 evaluates on its own and breaks out of the epoch loop once its validation accuracy
reaches the target; the other ranks go on into the next epoch and wait in DDP's gradient
allreduce for a partner that has left. Found as collective-mismatch: rank 0 left the loop after
epoch 1, the others went on into epoch 2.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    train, val = data(640, 1), data(200, 2)
    sampler = DistributedSampler(train)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    model = DDP(nn.Linear(10, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(10):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        if rank == 0:
            model.eval()
            with torch.no_grad():
                acc = (model.module(val.tensors[0]).argmax(1) == val.tensors[1]).float().mean()
            print(f"epoch {epoch}: val acc {acc:.3f}")
            if epoch >= 1 and acc > 0.5:
                print("target reached, stopping")
                break
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
