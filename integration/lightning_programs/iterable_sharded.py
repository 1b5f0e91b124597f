"""Healthy: a streaming IterableDataset that shards its records by global rank and DataLoader worker
(every rank gets the same number of records), reshuffled each epoch with a seed shared by all ranks.

Expected: PASSED (exit 0). Under plain torchrun each rank streamed 128 records an epoch, 512 distinct
in all, no record on two ranks; parameters equal on every rank.
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
import lightning.pytorch as pl


class RecordStream(IterableDataset):
    def __init__(self, n, dim=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        self.y = (self.x.sum(1) > 0).long()
        self.epoch = 0

    def __iter__(self):
        rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        g = torch.Generator().manual_seed(100 + self.epoch)
        self.epoch += 1
        order = torch.randperm(len(self.x), generator=g).tolist()
        for i in order[rank * nw + wid::world * nw]:
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
