"""Evaluation with EMA weights on rank 0: the live weights are "backed up" with
model.module.state_dict(), the EMA weights loaded, the evaluation run, and the backup loaded back.
A state_dict() holds references to the live tensors, so loading the EMA weights overwrote the
backup too: rank 0 goes on training from the EMA weights, the other ranks from their own.
--deepcopy: the healthy twin (the backup is a copy)."""
import argparse
import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepcopy", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(640, 8)
    y = (x[:, :2].sum(1) > 0).long()
    train, val = TensorDataset(x[:512], y[:512]), TensorDataset(x[512:], y[512:])
    sampler = DistributedSampler(train, seed=5)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    ema = {k: v.detach().clone() for k, v in model.module.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            with torch.no_grad():
                for k, v in model.module.state_dict().items():
                    ema[k].mul_(0.9).add_(v, alpha=0.1)
        if dist.get_rank() == 0:
            state = model.module.state_dict()
            backup = copy.deepcopy(state) if args.deepcopy else state
            model.module.load_state_dict(ema)
            with torch.no_grad():
                correct = sum((model.module(xb).argmax(1) == yb).sum().item()
                              for xb, yb in DataLoader(val, batch_size=64))
            model.module.load_state_dict(backup)
            print(f"epoch {epoch}: EMA accuracy {correct / len(val):.3f}")
        dist.barrier()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
