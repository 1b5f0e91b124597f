"""Tokenise once, cache for the other ranks: rank 0 builds the dataset (its constructor sorts the
examples by length, for bucketing) and writes the cache; after a barrier, ranks 1-3 load the cache
through a classmethod that bypasses the constructor, so their rows keep the corpus order. Index i
is another example on rank 0 than on the others: examples are trained twice or never (coverage
and disjointness, read from the dataset's column tensors). With --load-everywhere every rank,
rank 0 included, loads the cache: the healthy twin. The cache goes to --cache-dir."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class TokenDataset(Dataset):
    def __init__(self, tokens, lengths, labels):
        order = torch.argsort(lengths, stable=True)
        self.tokens, self.lengths, self.labels = tokens[order], lengths[order], labels[order]

    @classmethod
    def from_cache(cls, path):
        ds = cls.__new__(cls)
        ds.tokens, ds.lengths, ds.labels = torch.load(path)
        return ds

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


def build(path):
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(4, 16, (512,), generator=g)
    tokens = torch.randint(1, 100, (512, 16), generator=g)
    labels = torch.randint(0, 2, (512,), generator=g)
    torch.save((tokens, lengths, labels), path)  # the corpus order, as tokenised
    return TokenDataset(tokens, lengths, labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--load-everywhere", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    path = os.path.join(args.cache_dir, "tokens.pt")
    if rank == 0:
        data = build(path)
    dist.barrier()
    if rank != 0 or args.load_everywhere:
        data = TokenDataset.from_cache(path)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.EmbeddingBag(100, 8), nn.Linear(8, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for tokens, labels in loader:
            opt.zero_grad()
            F.cross_entropy(model(tokens), labels).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
