"""Healthy: Lightning's defaults on 4 CPU ranks: a LightningDataModule, a sanity check before
training (2 validation batches, on by default) over a validation set of many batches, metrics logged
with sync_dist=True, checkpointing on.

Expected: PASSED (exit 0). Lightning puts a DistributedSampler under both loaders. Under plain
torchrun each of the 3 epochs trained all 640 samples once, no sample on two ranks, reshuffled; every
validation pass saw its 256 samples once; the parameters were equal on every rank after every step.
The sanity check (128 of the 256 validation samples) is no epoch.
"""
import os, tempfile
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


class DM(pl.LightningDataModule):
    def setup(self, stage=None):
        self.train_ds = IndexedDataset(640, seed=0)
        self.val_ds = IndexedDataset(256, seed=1)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=16, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=16)


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    pl.seed_everything(42)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         default_root_dir=os.path.join(tempfile.gettempdir(), "pl_sanity_check_sync_dist"),
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Net(), datamodule=DM())
