"""A healthy program: training with DistributedSampler and set_epoch; the validation set sharded
by hand, each rank evaluating its own Subset(val, range(rank, N, W)) in order (1000 samples at
W = 4, no padding, every sample scored once), the correct counts summed with all_reduce. Each
rank's validation loader reads another dataset (its own Subset): the HTML page must not merge their
indices into one chart as if every sample were consumed W times (html_verdict_agrees_test), and
the audit must not read the ranks' Subset positions as one dataset's indices (no-duplicates)."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def data(n, g):
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long())


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(0)
    train, val = data(400, g), data(1000, g)
    sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=25, sampler=sampler)
    val_loader = DataLoader(Subset(val, range(rank, len(val), world)), batch_size=50)
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
        if rank == 0:
            print("epoch %d: val accuracy %.3f" % (epoch, correct.item() / len(val)))
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
