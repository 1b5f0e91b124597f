"""Bug: a streaming IterableDataset. Lightning adds no DistributedSampler to an iterable dataset, and
this one does not shard itself: every rank streams the same records.

Expected: FAILED (exit 1), disjointness. Under plain torchrun each rank streamed all 512 records every
epoch, in the same batch order on all 4 ranks.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset
import lightning.pytorch as pl


class RecordStream(IterableDataset):
    def __init__(self, n, dim=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        self.y = (self.x.sum(1) > 0).long()
        self.epoch = 0

    def __iter__(self):
        g = torch.Generator().manual_seed(100 + self.epoch)  # reshuffle the stream each epoch
        self.epoch += 1
        for i in torch.randperm(len(self.x), generator=g).tolist():
            yield self.x[i], self.y[i], i


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


if __name__ == "__main__":
    pl.seed_everything(0)
    train = DataLoader(RecordStream(512), batch_size=32)
    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=2,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Net(), train)
