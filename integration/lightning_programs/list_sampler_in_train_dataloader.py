"""Bug: train_dataloader() draws the epoch's order itself (a permutation seeded with seed +
trainer.current_epoch), takes the rank's stride of it and passes that list as the sampler, with
use_distributed_sampler=False. Lightning calls train_dataloader() once
(reload_dataloaders_every_n_epochs=0): epoch 0's order is replayed every epoch.

Expected: FAILED (exit 1), reshuffle. Under plain torchrun every rank trained its 160 samples in the
same order in all 3 epochs.
--reload: the healthy twin (Trainer(reload_dataloaders_every_n_epochs=1): a new order each epoch).
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import lightning.pytorch as pl


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        g = torch.Generator().manual_seed(0)
        x = torch.randn(640, 8, generator=g)
        self.ds = TensorDataset(x, (x[:, :2].sum(1) > 0).long())

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def train_dataloader(self):
        t = self.trainer
        g = torch.Generator().manual_seed(42 + t.current_epoch)
        plan = torch.randperm(len(self.ds), generator=g)
        return DataLoader(self.ds, batch_size=16, sampler=plan[t.global_rank::t.world_size].tolist())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--reload", action="store_true")
    args = parser.parse_args()
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=3,
                         use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False,
                         reload_dataloaders_every_n_epochs=1 if args.reload else 0)
    trainer.fit(Net())
