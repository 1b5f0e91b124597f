"""Healthy: validation twice per training epoch (val_check_interval=0.5), metrics with
sync_dist=True, EarlyStopping on the synchronised val_loss (its patience too long to trigger).

Expected: PASSED (exit 0). Under plain torchrun each of the 3 epochs trained all 640 samples once
across the ranks; 6 validation passes, each over its 96 samples once; parameters equal on every rank.
"""
import os, tempfile
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
import lightning.pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping


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
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=5e-3)


if __name__ == "__main__":
    pl.seed_everything(21)
    train = DataLoader(IndexedDataset(640), batch_size=16, shuffle=True)
    val = DataLoader(IndexedDataset(96, seed=21), batch_size=12)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         val_check_interval=0.5, callbacks=[EarlyStopping("val_loss", patience=10)],
                         default_root_dir=os.path.join(tempfile.gettempdir(), "pl_val_check_interval"),
                         enable_progress_bar=False)
    trainer.fit(Net(), train, val)
