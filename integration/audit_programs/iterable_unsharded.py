"""An IterableDataset streamed under DDP without sharding.

The stream reads "records" (generated from a seed, as a file of shards would be read) and yields
them in order. Without --shard-by-rank every rank yields the whole stream: the ranks train on the
same batches (disjointness). With --shard-by-rank but --workers 2, each worker of a rank yields
the rank's whole shard: every batch twice (no-duplicates).
"""
import argparse
import itertools

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset


class RecordStream(IterableDataset):
    def __init__(self, n, shard_by_rank):
        self.n = n
        self.shard_by_rank = shard_by_rank
        # Read here, in the rank: a worker started by "forkserver" or "spawn" (Python 3.14's
        # default on Linux) has no process group.
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def records(self):
        for i in range(self.n):
            g = torch.Generator().manual_seed(i)
            x = torch.randn(6, generator=g)
            yield x, int(x[0] > 0)

    def __iter__(self):
        stream = self.records()
        if self.shard_by_rank:
            stream = itertools.islice(stream, self.rank, None, self.world_size)
        return stream


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--shard-by-rank", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    loader = DataLoader(RecordStream(640, args.shard_by_rank), batch_size=20,
                        num_workers=args.workers)
    model = DDP(nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        steps = 0
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            steps += 1
        print(f"rank {dist.get_rank()} epoch {epoch}: {steps} steps")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
