"""Bug: the LightningDataModule splits train/validation with random_split in setup(), which runs on
every rank, without a generator and without seed_everything: every rank makes its own split.

Expected: FAILED (exit 1), coverage. Under plain torchrun the ranks' splits differed, epoch 0 trained
474 distinct samples with 144 on more than one rank, validation saw 145 distinct of 160 (15 twice),
and some validation samples were trained on.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, random_split
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
        full = IndexedDataset(800)
        self.train_ds, self.val_ds = random_split(full, [640, 160])

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=32, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=40)


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=2,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net(), datamodule=DM())
