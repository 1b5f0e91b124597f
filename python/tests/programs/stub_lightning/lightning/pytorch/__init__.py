"""A stand-in for ``lightning.pytorch`` (tests/test_framework.py): a ``Trainer`` whose ``fit``
calls the program's hook and makes a barrier of its own, as Lightning's strategies do."""
import torch.distributed as dist

__version__ = "0.0-stub"


class Trainer:
    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs

    def fit(self, module):
        for epoch in range(self.max_epochs):
            module.training_epoch(self, epoch)
            dist.barrier()  # the framework's own collective

    def all_gather(self, tensor):
        out = [tensor.clone() for _ in range(dist.get_world_size())]
        dist.all_gather(out, tensor)
        return out
