"""Per-rank file listings in different orders: each rank lists the dataset's files itself.

On a cluster every node lists its own copy of the data (os.listdir, glob: the order is whatever the
file system gives), so index i names a different file on each rank. DistributedSampler's indices
are split perfectly, yet the ranks' shards overlap and leave files out. On one machine every
os.listdir agrees, so the listing is put in a rank-dependent order here, as different nodes'
file systems would. The fix is one line: sorted(os.listdir(root)).
"""
import argparse
import os
import random
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class FolderDataset(Dataset):
    """One sample per file; the label is in the file name."""

    def __init__(self, root, listing):
        self.root = root
        self.files = listing  # e.g. os.listdir(root), in this node's order

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        name = self.files[i]
        label = int(name.split("_")[1].split(".")[0])
        return torch.full((8,), float(label)), label % 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="ddph-files-") as root:
        names = ["sample_%d.bin" % i for i in range(120)]
        for name in names:
            open(os.path.join(root, name), "wb").close()
        listing = os.listdir(root)
        random.Random(rank).shuffle(listing)  # stands in for another node's file system order
        dataset = FolderDataset(root, listing)
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=10, sampler=sampler)
        model = DDP(nn.Linear(8, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
