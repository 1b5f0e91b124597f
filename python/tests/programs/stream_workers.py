"""One rank streaming an iterable dataset through forked and spawned DataLoader workers, two
passes each, the stream shuffled with numpy in the workers: worker_init_fn reseeding numpy with
a fixed seed, seeding it from torch.initial_seed(), or absent. Prints each batch and, after each
pass, the name of the loader's worker_init_fn (the program's own, whatever the recorder does)."""
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Shuffled(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        ids = np.arange(info.id, 32, info.num_workers)
        np.random.shuffle(ids)
        return iter(torch.tensor(ids).tolist())


def fixed_seed(worker_id):
    np.random.seed(7 + worker_id)


def seed_from_torch(worker_id):
    np.random.seed(torch.initial_seed() % 2**32)


def main():
    forms = (("fork", fixed_seed), ("fork", seed_from_torch), ("fork", None),
             ("spawn", fixed_seed))
    for context, init in forms:
        loader = DataLoader(Shuffled(), batch_size=4, num_workers=2, worker_init_fn=init,
                            multiprocessing_context=context)
        for _ in range(2):
            batches = [b.tolist() for b in loader]
            print(context, getattr(loader.worker_init_fn, "__name__", None), batches, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
