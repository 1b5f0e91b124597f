"""Healthy twin of eval_with_train_sampler.py: the validation loader has its own
DistributedSampler(val, shuffle=False); 1000 samples at W = 4, no padding, every sample scored once.
"""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def data(n, g):
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long())


def main():
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    train, val = data(400, g), data(1000, g)
    sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=25, sampler=sampler)
    val_loader = DataLoader(val, batch_size=50, sampler=DistributedSampler(val, shuffle=False))
    model = DDP(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in train_loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        correct = torch.zeros(1)
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model.module(x).argmax(1) == y).sum()
        dist.all_reduce(correct)
        if dist.get_rank() == 0:
            print("epoch %d: val accuracy %.3f" % (epoch, correct.item() / len(val)))
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
