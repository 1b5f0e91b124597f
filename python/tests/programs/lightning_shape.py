"""A program in PyTorch Lightning's shape over the stand-in package stub_lightning/ (no Lightning
here): its Trainer built, fit() calling the program's epoch, which steps an optimizer, gathers
through the trainer and logs its loss with sync_dist (tests/test_framework.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stub_lightning"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import lightning.pytorch as pl  # noqa: E402


class Module(pl.LightningModule):
    def __init__(self):
        self.train_data = torch.utils.data.TensorDataset(torch.ones(8, 2))
        self.own = torch.utils.data.DistributedSampler(self.train_data)  # the program's own
        self.net = torch.nn.Linear(2, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def training_epoch(self, trainer, epoch):
        loss = self.net(torch.ones(4, 2)).sum()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        trainer.all_gather(torch.tensor([float(epoch)]))  # the program's gather, through the trainer
        self.log("loss", loss.item(), sync_dist=True)  # reduced by the framework at the epoch's end


def main():
    dist.init_process_group("gloo")
    pl.Trainer(max_epochs=2).fit(Module())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
