"""Healthy: a model with BatchNorm, dataloaders rebuilt every epoch
(reload_dataloaders_every_n_epochs=1), and trainer.validate after fit.

Expected: PASSED (exit 0). Under plain torchrun the 3 epochs each trained all 512 samples once across
the ranks; every validation pass (sanity check, 3 in fit, validate) saw its 200 samples once; the
parameters were equal on every rank after every step. BatchNorm's running statistics differ between
ranks between forwards, which is how DDP works (it broadcasts rank 0's buffers at the next forward).
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
        self.train_ds = IndexedDataset(512)
        self.val_ds = IndexedDataset(200, seed=9)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=32, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=25)


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    pl.seed_everything(3)
    dm, model = DM(), Net()
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         reload_dataloaders_every_n_epochs=1,
                         default_root_dir=os.path.join(tempfile.gettempdir(), "pl_batchnorm_reload_then_validate"),
                         enable_progress_bar=False)
    trainer.fit(model, datamodule=dm)
    trainer.validate(model, datamodule=dm)
