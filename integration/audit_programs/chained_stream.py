"""Two streams chained into one training stream: the main corpus, which each rank reads its own
shard of, and a short set of curated hard examples appended to every epoch. The hard examples are
not sharded, so every rank trains on all of them: the last batches of each rank's epoch are the
same on every rank (disjointness, a part of the stream). With --shard-hard they are sharded too
(the healthy twin: healthy/chained_stream_sharded.py).
"""
import argparse
import itertools

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ChainDataset, DataLoader, IterableDataset


class Records(IterableDataset):
    """`n` records generated from their ids (as a file would be read), `first` the first id."""

    def __init__(self, first, n, shard):
        self.first, self.n, self.shard = first, n, shard
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def __iter__(self):
        ids = range(self.first, self.first + self.n)
        if self.shard:
            ids = itertools.islice(ids, self.rank, None, self.world_size)
        for i in ids:
            x = torch.randn(8, generator=torch.Generator().manual_seed(i))
            yield x, int(x[0] + x[1] > 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shard-hard", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    stream = ChainDataset([Records(0, 512, shard=True), Records(10_000, 128, shard=args.shard_hard)])
    loader = DataLoader(stream, batch_size=16)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
