"""Bug: a stop decided on rank 0 only (trainer.should_stop = True inside `if
self.trainer.is_global_zero:`). Lightning does not synchronise a should_stop set by hand, so rank 0
leaves after epoch 1 while the other ranks begin epoch 2.

Expected: FAILED (exit 1), collective-mismatch. Under plain torchrun rank 0 exited after epoch 1 and
ranks 1-3 failed in epoch 2's first backward (Gloo: connection closed by peer), exit 1.
"""
from datetime import timedelta
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
import lightning.pytorch as pl
from lightning.pytorch.strategies import DDPStrategy


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
    def __init__(self, epoch_budget=2):
        super().__init__()
        self.epoch_budget = epoch_budget
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def on_train_epoch_end(self):
        # the "time budget" bookkeeping lives on the main process
        if self.trainer.is_global_zero and self.current_epoch + 1 >= self.epoch_budget:
            print("budget reached, stopping")
            self.trainer.should_stop = True

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    pl.seed_everything(4)
    train = DataLoader(IndexedDataset(512), batch_size=32, shuffle=True)
    trainer = pl.Trainer(accelerator="cpu", devices=4,
                         strategy=DDPStrategy(timeout=timedelta(seconds=30)), max_epochs=4,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net(), train)
