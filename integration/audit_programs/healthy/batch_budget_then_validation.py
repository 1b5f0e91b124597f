"""Lightning's limit_train_batches as a plain loop: each epoch trains the first half of the
loader's batches (a batch budget), then validates over a sharded validation loader to its end; the
training sampler reshuffles every epoch, so each epoch leaves other samples out, by design
(640 training samples, W = 4: 10 batches of 16 a rank, 5 trained)."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

LIMIT_TRAIN_BATCHES = 0.5


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(640, 8)
    train = TensorDataset(x, (x[:, 0] > 0).long())
    xv = torch.randn(128, 8)
    val = TensorDataset(xv, (xv[:, 0] > 0).long())
    train_sampler = DistributedSampler(train, shuffle=True)
    train_loader = DataLoader(train, batch_size=16, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=16, sampler=DistributedSampler(val, shuffle=False))
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    budget = int(len(train_loader) * LIMIT_TRAIN_BATCHES)
    for epoch in range(3):
        train_sampler.set_epoch(epoch)
        model.train()
        for step, (xb, yb) in enumerate(train_loader):
            if step >= budget:
                break
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        correct = torch.zeros(1)
        with torch.no_grad():
            for xb, yb in val_loader:
                correct += (model(xb).argmax(1) == yb).sum()
        dist.all_reduce(correct)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {int(correct.item())} of {len(val)} correct")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
