"""Healthy: max_steps=25 ends the run in the middle of its third epoch; DataLoader workers
(persistent for training), an lr scheduler stepped every step, save_hyperparameters.

Expected: PASSED (exit 0). Under plain torchrun epochs 0 and 1 trained all 640 samples once across
the ranks and epoch 2 stopped after 5 of 10 batches (320 samples) when max_steps was reached;
parameters equal on every rank after every step.
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
    def __init__(self, batch_size=16):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        self.train_ds = IndexedDataset(640)
        self.val_ds = IndexedDataset(192, seed=5)

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True,
                          num_workers=2, persistent_workers=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=self.batch_size, num_workers=1)


class Net(pl.LightningModule):
    def __init__(self, lr=0.05):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        acc = (self.net(x).argmax(1) == y).float().mean()
        self.log("val_acc", acc, sync_dist=True)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


if __name__ == "__main__":
    pl.seed_everything(1)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=10, max_steps=25,
                         default_root_dir=os.path.join(tempfile.gettempdir(), "pl_max_steps_with_workers"),
                         enable_progress_bar=False)
    trainer.fit(Net(), datamodule=DM())
