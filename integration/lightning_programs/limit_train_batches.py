"""Healthy: limit_train_batches=0.5 trains half of each epoch's reshuffled shard, on purpose.

Expected: PASSED (exit 0). Under plain torchrun each epoch trained 320 of 640 samples (5 of 10
batches a rank), no sample on two ranks, a new order every epoch (564 of 640 seen over the 3
epochs, as limit_train_batches means); parameters equal on every rank. A step budget is a note,
not a coverage finding.
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


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


if __name__ == "__main__":
    pl.seed_everything(7)
    train = DataLoader(IndexedDataset(640), batch_size=16, shuffle=True)
    val = DataLoader(IndexedDataset(128, seed=3), batch_size=32)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         limit_train_batches=0.5, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False)
    trainer.fit(Net(), train, val)
