"""A stand-in for ``lightning.pytorch`` (tests/test_framework.py): a ``Trainer`` whose ``fit``
calls the program's hook and makes a barrier of its own, as Lightning's strategies do, puts a
DistributedSampler of its own under the module's training data (seeded from PL_GLOBAL_SEED, as
Lightning's data connector does), and a
``LightningModule`` whose ``log(..., sync_dist=True)`` is reduced across ranks at the epoch's end,
away from the program's line, as Lightning's results are."""
import os

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

__version__ = "0.0-stub"


class LightningModule:
    def log(self, name, value, sync_dist=False):
        if sync_dist:
            self.__dict__.setdefault("_synced", {})[name] = torch.tensor([float(value)])

    def reduce_logged(self):
        for value in self.__dict__.pop("_synced", {}).values():
            dist.all_reduce(value)


class Trainer:
    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs

    def fit(self, module):
        data = getattr(module, "train_data", None)
        if data is not None:
            module.sampler = DistributedSampler(data, seed=int(os.environ.get("PL_GLOBAL_SEED", 0)))
        for epoch in range(self.max_epochs):
            module.training_epoch(self, epoch)
            if isinstance(module, LightningModule):
                module.reduce_logged()  # the epoch's results, reduced by the framework
            dist.barrier()  # the framework's own collective

    def all_gather(self, tensor):
        out = [tensor.clone() for _ in range(dist.get_world_size())]
        dist.all_gather(out, tensor)
        return out
