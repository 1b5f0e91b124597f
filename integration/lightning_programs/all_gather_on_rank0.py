"""Bug: a collective (self.all_gather) inside `if self.global_rank == 0:` in on_train_epoch_end.
Rank 0 waits in all_gather while the other ranks go on to the next epoch.

Expected: FAILED (exit 1), collective-mismatch. Under plain torchrun rank 0 stood in all_gather after
epoch 0 while ranks 1-3 began epoch 1, and the run ended with Gloo's timeout (30 s, set through
DDPStrategy(timeout=...)) and exit 1 after 41 s.
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
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.losses.append(loss.detach())
        return loss

    def on_train_epoch_end(self):
        if self.global_rank == 0:
            # report the mean training loss over all ranks
            all_losses = self.all_gather(torch.stack(self.losses))
            print(f"epoch {self.current_epoch}: mean loss over ranks {all_losses.mean():.4f}")
        self.losses.clear()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    pl.seed_everything(5)
    train = DataLoader(IndexedDataset(512), batch_size=32, shuffle=True)
    trainer = pl.Trainer(accelerator="cpu", devices=4,
                         strategy=DDPStrategy(timeout=timedelta(seconds=30)), max_epochs=3,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net(), train)
