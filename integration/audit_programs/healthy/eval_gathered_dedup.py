"""Healthy: a padded evaluation whose results are gathered and kept once per sample.

The test set (10 samples) goes through DistributedSampler(shuffle=False) at W = 4: it pads to 12,
so samples 0 and 1 are evaluated twice. Each rank returns (index, correct) pairs, all_gather_object
brings them together, and a dict keyed by index keeps each sample once: the accuracy is over
exactly 10 samples. The validation sampler also shuffles (shuffle=True) without set_epoch, which
is fine for an evaluation: its order does not matter. --len-loop drives the loaders for
len(loader) batches, as Lightning does.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Indexed(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 20, generator=g)
        self.y = (self.x[:, :5].sum(1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i], i


def batches(loader, len_loop):
    if not len_loop:
        yield from loader
        return
    it = iter(loader)
    for _ in range(len(loader)):
        yield next(it)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--len-loop", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    train, test = Indexed(600, 1), Indexed(10, 3)
    train_sampler = DistributedSampler(train)
    train_loader = DataLoader(train, batch_size=32, sampler=train_sampler)
    test_loader = DataLoader(test, batch_size=2, sampler=DistributedSampler(test, shuffle=True))
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        for xb, yb, _ in batches(train_loader, args.len_loop):
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        mine = []
        with torch.no_grad():
            for xb, yb, ib in batches(test_loader, args.len_loop):
                hits = (model(xb).argmax(1) == yb).tolist()
                mine.extend(zip(ib.tolist(), hits))
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, mine)
        once = {i: hit for part in gathered for i, hit in part}  # the padding's copies collapse
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: accuracy {sum(once.values()) / len(once):.4f} over {len(once)}", flush=True)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
