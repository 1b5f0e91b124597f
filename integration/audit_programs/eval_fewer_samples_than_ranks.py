"""Bug: a validation set with fewer samples than ranks, sharded with DistributedSampler(
drop_last=True) (copied from the training loader's arguments): num_samples = 3 // 4 = 0, so no
rank evaluates anything and the printed accuracy is the guard's 0.0, every epoch.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    train = TensorDataset(x, (x.sum(1) > 0).long())
    val = TensorDataset(x[:3], (x[:3].sum(1) > 0).long())
    train_sampler = DistributedSampler(train, drop_last=True)
    val_sampler = DistributedSampler(val, shuffle=False, drop_last=True)
    train_loader = DataLoader(train, batch_size=16, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=16, sampler=val_sampler)
    model = DDP(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_sampler.set_epoch(epoch)
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for xb, yb in val_loader:
                correct += torch.tensor([(model(xb).argmax(1) == yb).sum().item(), len(yb)])
        dist.all_reduce(correct)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: accuracy {correct[0] / max(correct[1], 1):.3f}", flush=True)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
