"""Healthy: manual optimization with two optimizers (encoder and head), the encoder stepped every
other batch, both lr schedulers stepped by hand at each epoch's end.

Expected: PASSED (exit 0). Under plain torchrun each epoch trained all 512 samples once across the
ranks, the parameters changed at every step and were equal on every rank.
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
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 2)

    def training_step(self, batch, batch_idx):
        opt_enc, opt_head = self.optimizers()
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.head(self.encoder(x)), y)
        opt_enc.zero_grad()
        opt_head.zero_grad()
        self.manual_backward(loss)
        opt_head.step()
        if batch_idx % 2 == 0:
            opt_enc.step()
        self.log("train_loss", loss, prog_bar=True)

    def on_train_epoch_end(self):
        for s in self.lr_schedulers():
            s.step()

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        self.log("val_loss", nn.functional.cross_entropy(self.head(self.encoder(x)), y), sync_dist=True)

    def configure_optimizers(self):
        opt_enc = torch.optim.SGD(self.encoder.parameters(), lr=0.05)
        opt_head = torch.optim.Adam(self.head.parameters(), lr=1e-2)
        return [opt_enc, opt_head], [torch.optim.lr_scheduler.StepLR(opt_enc, 1, 0.5),
                                     torch.optim.lr_scheduler.StepLR(opt_head, 1, 0.5)]


if __name__ == "__main__":
    pl.seed_everything(8)
    train = DataLoader(IndexedDataset(512), batch_size=32, shuffle=True)
    val = DataLoader(IndexedDataset(128, seed=8), batch_size=32)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=2,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net(), train, val)
