"""Bug: 402 validation samples on 4 ranks: Lightning's DistributedSampler pads the validation set to
404, and the accuracy's numerator and count are summed over the ranks (sync_dist=True,
reduce_fx="sum"): 2 samples are counted twice in every validation metric.

Expected: FAILED (exit 1), no-duplicates. Under plain torchrun each rank evaluated 101 samples (404
for 402) and the logged val_count was 404.0 every epoch.
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
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        correct = (self.net(x).argmax(1) == y).sum().float()
        self.log("val_correct", correct, reduce_fx="sum", sync_dist=True)
        self.log("val_count", float(len(y)), reduce_fx="sum", sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    pl.seed_everything(11)
    train = DataLoader(IndexedDataset(512), batch_size=32, shuffle=True)
    val = DataLoader(IndexedDataset(402, seed=6), batch_size=32)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=2,
                         num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False)
    trainer.fit(Net(), train, val)
