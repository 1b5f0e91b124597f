"""A length-bucketing batch sampler Lightning cannot re-instantiate, so
use_distributed_sampler=False; it shards its batches by rank itself (every world_size-th batch) and
reshuffles with seed + epoch in its own set_epoch.

Expected: FAILED (exit 1), reshuffle. Its sharding is right (each of the 3 epochs trained all 640
samples once, no sample on two ranks, parameters equal on every rank), but Lightning 2.1 calls
set_epoch on loader.sampler and loader.batch_sampler.sampler only, never on the batch sampler
itself: every epoch repeats epoch 0's order (a print in set_epoch never appears, under plain
torchrun too). Written as healthy in an earlier round; corrected from that evidence.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
import lightning.pytorch as pl


class IndexedDataset(Dataset):
    """n samples of a fixed random problem, the same on every rank; item i is (x_i, y_i, i)."""

    def __init__(self, n, dim=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        w = torch.randn(dim, generator=g)
        self.y = (self.x @ w > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i], i


class BucketBatchSampler:
    """Groups samples of similar 'length' into batches; each rank takes every world_size-th batch."""

    def __init__(self, lengths, batch_size, num_replicas, rank, seed=0):
        self.lengths, self.batch_size = lengths, batch_size
        self.num_replicas, self.rank, self.seed, self.epoch = num_replicas, rank, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _batches(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.argsort(torch.tensor(self.lengths) + torch.rand(len(self.lengths), generator=g))
        batches = [order[i:i + self.batch_size].tolist() for i in range(0, len(order), self.batch_size)]
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[i] for i in perm]
        n = len(batches) - len(batches) % self.num_replicas  # equal number of batches on every rank
        return batches[self.rank:n:self.num_replicas]

    def __iter__(self):
        return iter(self._batches())

    def __len__(self):
        nb = (len(self.lengths) + self.batch_size - 1) // self.batch_size
        return nb // self.num_replicas


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.ds = IndexedDataset(640)
        self.lengths = [int(v) for v in (self.ds.x.abs().sum(1) * 3).long()]

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def train_dataloader(self):
        bs = BucketBatchSampler(self.lengths, 16, self.trainer.world_size, self.trainer.global_rank, seed=42)
        return DataLoader(self.ds, batch_sampler=bs)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False)
    trainer.fit(Net())
