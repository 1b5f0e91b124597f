"""Healthy DDP training: two datasets trained together, evaluation without padding.

DistributedSampler + set_epoch for both training sets (600 and 500 samples). The shorter set is
re-iterated (a new pass, with its own set_epoch, each time it runs out) so that every sample of
both sets is seen every epoch, and the pass in progress when the longer set ends is finished.
Evaluation: DistributedSampler(shuffle=False) over 200 samples (divisible by 2 and 4: no padding),
under torch.no_grad(), correct predictions summed with all_reduce. Healthy at W=2 and W=4.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    y = (x[:, :5].sum(1) > 0).long()
    return TensorDataset(x, y)


class Passes:
    """Draws batches from a loader indefinitely: each pass gets its own sampler epoch."""

    def __init__(self, loader, sampler):
        self.loader, self.sampler = loader, sampler
        self.passes, self.it = 0, None

    def _start(self):
        self.sampler.set_epoch(self.passes)
        self.passes += 1
        self.it = iter(self.loader)

    def next(self):
        if self.it is None:
            self._start()
        try:
            return next(self.it)
        except StopIteration:
            self._start()
            return next(self.it)

    def rest_of_pass(self):
        if self.it is not None:
            yield from self.it
        self.it = None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)

    train_a, train_b, test = make_dataset(600, 1), make_dataset(500, 2), make_dataset(200, 3)
    sampler_a, sampler_b = DistributedSampler(train_a), DistributedSampler(train_b)
    loader_a = DataLoader(train_a, batch_size=25, sampler=sampler_a)
    loader_b = DataLoader(train_b, batch_size=42, sampler=sampler_b)
    test_loader = DataLoader(test, batch_size=25, sampler=DistributedSampler(test, shuffle=False))
    passes_b = Passes(loader_b, sampler_b)

    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    for epoch in range(args.epochs):
        model.train()
        sampler_a.set_epoch(epoch)
        total, steps = 0.0, 0
        for xa, ya in loader_a:
            xb, yb = passes_b.next()
            total += step(torch.cat([xa, xb]), torch.cat([ya, yb]))
            steps += 1
        for xb, yb in passes_b.rest_of_pass():
            total += step(xb, yb)
            steps += 1

        model.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for x, y in test_loader:
                correct += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(correct)
        if rank == 0:
            print(f"epoch {epoch}: loss {total / steps:.6f} accuracy {correct[0] / len(test):.4f} "
                  f"({int(correct[1])} evaluated)", flush=True)
    del model, step  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
