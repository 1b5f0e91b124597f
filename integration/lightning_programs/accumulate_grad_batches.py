"""Healthy: accumulate_grad_batches=2 (Lightning skips DDP's all-reduce on the accumulating steps
under no_sync), gradient clipping, a rank_zero_only print, ModelCheckpoint on val_loss.

Expected: PASSED (exit 0). Under plain torchrun each epoch trained all 640 samples once across the
ranks, the parameters changed every second batch (15 optimizer steps) and were equal on every rank.
"""
import os, tempfile
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only


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


@rank_zero_only
def report(msg):
    print(msg)


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), sync_dist=True)

    def on_validation_epoch_end(self):
        report(f"epoch {self.current_epoch}: val_loss {self.trainer.callback_metrics.get('val_loss')}")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


if __name__ == "__main__":
    pl.seed_everything(12)
    train = DataLoader(IndexedDataset(640), batch_size=16, shuffle=True)
    val = DataLoader(IndexedDataset(160, seed=12), batch_size=20)
    ckpt = ModelCheckpoint(monitor="val_loss", save_top_k=1)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         accumulate_grad_batches=2, gradient_clip_val=0.5,
                         default_root_dir=os.path.join(tempfile.gettempdir(), "pl_accumulate_grad_batches"),
                         enable_progress_bar=False, callbacks=[ckpt])
    trainer.fit(Net(), train, val)
