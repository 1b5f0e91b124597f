"""Bug: seed_everything(1234 + rank), "different augmentation noise on every GPU". Lightning puts
a DistributedSampler under the training loader seeded from seed_everything's seed (PL_GLOBAL_SEED),
so every rank shuffles its own way: the shards overlap and leave samples out.

Expected: FAILED (exit 1), coverage (or disjointness), the cause naming seed_everything."""
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
import lightning.pytorch as pl


class IndexedDataset(Dataset):
    def __init__(self, n, dim=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        self.y = (self.x @ torch.randn(dim, generator=g) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] + 0.01 * torch.randn(self.x.shape[1]), self.y[i]


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def train_dataloader(self):
        return DataLoader(IndexedDataset(640), batch_size=16, shuffle=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    pl.seed_everything(1234 + int(os.environ.get("RANK", 0)))
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=2, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net())
