"""One rank (or more) iterating DataLoaders with worker processes: fork and spawn, a custom
sampler (indices recorded) and persistent workers. Prints the indices each batch held."""
import sys

import torch
from torch.utils.data import DataLoader, Dataset, Sampler


class Indexed(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.tensor(i)


class Reversed(Sampler):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n - 1, -1, -1))

    def __len__(self):
        return self.n


def main():
    ds = Indexed()
    for context in ("fork", "spawn"):
        loader = DataLoader(ds, batch_size=6, sampler=Reversed(len(ds)), num_workers=2,
                            multiprocessing_context=context)
        for batch in loader:
            print(context, batch.tolist(), flush=True)
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True, shuffle=True)
    for epoch in range(2):
        for batch in loader:
            print("persistent", epoch, batch.tolist(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
