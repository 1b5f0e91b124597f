"""Bug: use_distributed_sampler=False and a hand-built DistributedSampler seeded with the rank
(seed=1000 + rank, "give every rank its own randomness"): each rank shuffles its own way, so the
shards overlap and leave samples out.

Expected: FAILED (exit 1), coverage (or disjointness). Under plain torchrun epoch 0 trained 430
distinct samples of 640: 210 on no rank, 170 on more than one.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler
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


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.train_ds = IndexedDataset(640)
        self.val_ds = IndexedDataset(128, seed=4)

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), sync_dist=True)

    def train_dataloader(self):
        # "give every rank its own randomness"
        sampler = DistributedSampler(self.train_ds, num_replicas=self.trainer.world_size,
                                     rank=self.trainer.global_rank, shuffle=True,
                                     seed=1000 + self.trainer.global_rank)
        return DataLoader(self.train_ds, batch_size=16, sampler=sampler)

    def val_dataloader(self):
        sampler = DistributedSampler(self.val_ds, num_replicas=self.trainer.world_size,
                                     rank=self.trainer.global_rank, shuffle=False)
        return DataLoader(self.val_ds, batch_size=16, sampler=sampler)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False)
    trainer.fit(Net())
