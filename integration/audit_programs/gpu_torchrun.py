"""A GPU DDP program written as PyTorch's DDP tutorial writes it (ddp-tutorial-series,
multigpu_torchrun.py), with mixed precision and a snapshot: run it with torchrun on GPUs, or
unmodified on a laptop with `ddp-sim launch --cpu`.

torchrun's LOCAL_RANK, torch.cuda.set_device, init_process_group("nccl"), .to(gpu_id),
DDP(device_ids=[gpu_id]), torch.autocast("cuda") with a GradScaler, tensors made with device=,
rank 0 saving a snapshot every epoch and every rank resuming from it with
map_location="cuda:<gpu_id>", and the tutorial's `len(next(iter(loader))[0])` to print the batch
size before each epoch (a peek, not an epoch). Healthy. --forget-set-epoch drops the sampler's set_epoch (every
epoch then repeats epoch 0's order).
"""
import argparse
import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    def __init__(self, size):
        g = torch.Generator().manual_seed(0)
        self.data = [(torch.rand(20, generator=g), torch.rand(1, generator=g)) for _ in range(size)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


def ddp_setup():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group(backend="nccl")


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path, set_epoch):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to(self.gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        self.set_epoch = set_epoch
        if snapshot_path and os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model, device_ids=[self.gpu_id], output_device=self.gpu_id)
        self.scaler = torch.cuda.amp.GradScaler()

    def _load_snapshot(self, snapshot_path):
        loc = f"cuda:{self.gpu_id}"
        snapshot = torch.load(snapshot_path, map_location=loc)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            output = self.model(source)
            loss = F.mse_loss(output, targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        if self.set_epoch:
            self.train_data.sampler.set_epoch(epoch)
        total = torch.zeros(1, device=self.gpu_id)
        steps = torch.tensor([0.0], device=f"cuda:{self.gpu_id}")
        for source, targets in self.train_data:
            source = source.to(self.gpu_id, non_blocking=True)
            targets = targets.to(self.gpu_id, non_blocking=True)
            total += self._run_batch(source, targets).float()
            steps += 1
        dist.all_reduce(total)
        dist.all_reduce(steps)
        if self.gpu_id == 0:
            print(f"[GPU{self.gpu_id}] Epoch {epoch} | Steps: {int(steps.item())} | "
                  f"mean loss {total.item() / steps.item():.6f}")

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
        torch.save(snapshot, self.snapshot_path)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.snapshot_path and self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("total_epochs", type=int)
    parser.add_argument("save_every", type=int)
    parser.add_argument("--batch_size", default=16, type=int)
    parser.add_argument("--snapshot_path", default="")
    parser.add_argument("--forget-set-epoch", action="store_true")
    args = parser.parse_args()
    ddp_setup()
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    dataset = MyTrainDataset(256)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(dataset, batch_size=args.batch_size, pin_memory=True, shuffle=False,
                        sampler=DistributedSampler(dataset))
    trainer = Trainer(model, loader, optimizer, args.save_every, args.snapshot_path,
                      not args.forget_set_epoch)
    trainer.train(args.total_epochs)
    dist.barrier()
    del trainer  # the DDP module goes first (torch 1.13 can hang at exit otherwise: docs/audit.md)
    destroy_process_group()


if __name__ == "__main__":
    main()
