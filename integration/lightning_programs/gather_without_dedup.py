"""Bug: the predictions of a padded validation set (402 samples, 4 ranks, 404 evaluated) gathered
with self.all_gather and scored without dropping DistributedSampler's padding duplicates.

Expected: FAILED (exit 1), no-duplicates: that is the truth (under plain torchrun the gathered metric
scored 404 predictions, accuracy 0.45050 where the 402 distinct give 0.45025). KNOWN SILENT PASS:
the audit says PASSED with a note, because the trace records the all_gather but not what the
program does with the gathered tensor; gather_with_dedup.py, which drops the duplicates by index,
gives the same trace. expected.tsv marks it known, so scripts/lightning-check.sh reports it apart.
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
        self.val_preds, self.val_targets = [], []

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.val_preds.append(self.net(x).argmax(1))
        self.val_targets.append(y)

    def on_validation_epoch_end(self):
        preds = self.all_gather(torch.cat(self.val_preds)).flatten()
        targets = self.all_gather(torch.cat(self.val_targets)).flatten()
        acc = (preds == targets).float().mean()
        self.log("val_acc", acc, rank_zero_only=True)
        if self.trainer.is_global_zero:
            print(f"val_acc {acc:.4f} over {preds.numel()} predictions")
        self.val_preds.clear()
        self.val_targets.clear()

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
