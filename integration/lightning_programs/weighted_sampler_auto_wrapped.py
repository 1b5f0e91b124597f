"""Healthy: the DataModule returns a WeightedRandomSampler (with replacement, 1024 draws from 1600
samples, its generator seeded alike on every rank); Lightning wraps it in its
DistributedSamplerWrapper, which draws the same list on every rank and gives each rank its
positions in it. The wrapper's own length is 1024 draws, and it yields indices of the 1600-sample
dataset.

Expected: PASSED (exit 0). Under plain torchrun the ranks' indices together were each epoch's
draw list, as a multiset, in every epoch.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler
import lightning.pytorch as pl


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1600, 8, generator=g)
        y = (torch.rand(1600, generator=g) < 0.2).long()
        self.ds = TensorDataset(x, y)
        self.weights = torch.where(y == 1, 4.0, 1.0)
        self.gen = torch.Generator().manual_seed(7)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def train_dataloader(self):
        sampler = WeightedRandomSampler(self.weights, num_samples=1024, replacement=True,
                                        generator=self.gen)
        return DataLoader(self.ds, batch_size=32, sampler=sampler)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net())
