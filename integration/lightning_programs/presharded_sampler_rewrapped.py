"""Bug: the DataModule already gives each rank its own quarter of the data (a SubsetRandomSampler
over the indices rank::world_size), and Lightning (use_distributed_sampler=True, the default)
wraps that sampler in its DistributedSamplerWrapper, which shards it by rank again: each rank
trains 64 of its 256 samples an epoch.

Expected: FAILED (exit 1), coverage. Under plain torchrun 256 of the 1024 samples were trained in
each epoch.
--no-distributed-sampler: the healthy twin (Trainer(use_distributed_sampler=False)).
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, SubsetRandomSampler, TensorDataset
import lightning.pytorch as pl


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1024, 8, generator=g)
        self.ds = TensorDataset(x, (x[:, :2].sum(1) > 0).long())

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def train_dataloader(self):
        t = self.trainer
        mine = list(range(t.global_rank, len(self.ds), t.world_size))
        sampler = SubsetRandomSampler(mine, generator=torch.Generator().manual_seed(7))
        return DataLoader(self.ds, batch_size=16, sampler=sampler)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-distributed-sampler", action="store_true")
    args = parser.parse_args()
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         use_distributed_sampler=not args.no_distributed_sampler, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net())
