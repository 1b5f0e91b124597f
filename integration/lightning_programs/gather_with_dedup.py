"""Healthy: the same padded validation set (402 samples, 4 ranks, 404 evaluated), predictions
gathered with their sample indices and the padding duplicates dropped by index before scoring.

Expected: PASSED (exit 0). Under plain torchrun 404 predictions were gathered and 402 scored, each
sample once. The audit notes the padding and the gather after it, and cannot fail it: the program
does what the note advises.
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
        self.outs = []

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y, idx = batch
        self.outs.append(torch.stack([idx, self.net(x).argmax(1), y], dim=1))

    def on_validation_epoch_end(self):
        rows = self.all_gather(torch.cat(self.outs)).reshape(-1, 3)
        # DistributedSampler pads with repeated samples: keep one row per sample index
        order = torch.argsort(rows[:, 0], stable=True)
        rows = rows[order]
        keep = torch.ones(len(rows), dtype=torch.bool)
        keep[1:] = rows[1:, 0] != rows[:-1, 0]
        rows = rows[keep]
        acc = (rows[:, 1] == rows[:, 2]).float().mean()
        self.log("val_acc", acc, rank_zero_only=True)
        if self.trainer.is_global_zero:
            print(f"val_acc {acc:.4f} over {len(rows)} predictions")
        self.outs.clear()

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
