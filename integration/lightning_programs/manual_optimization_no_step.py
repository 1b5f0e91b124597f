"""Bug: manual optimization (automatic_optimization=False): zero_grad, manual_backward and
clip_gradients every step, but opt.step() is never called: the parameters never change.

Expected: FAILED (exit 1), parameter-updates. Under plain torchrun the parameter hash never changed
(every step equal to the starting hash) and global_step stayed 0.
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
        self.automatic_optimization = False
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        opt.zero_grad()
        self.manual_backward(loss)
        self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
        self.log("train_loss", loss, prog_bar=True)

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


if __name__ == "__main__":
    pl.seed_everything(2)
    train = DataLoader(IndexedDataset(512), batch_size=32, shuffle=True)
    val = DataLoader(IndexedDataset(128, seed=8), batch_size=32)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=2,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net(), train, val)
