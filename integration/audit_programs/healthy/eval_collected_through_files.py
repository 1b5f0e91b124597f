"""Evaluation results collected as mmcv's collect_results_cpu does: each rank pickles its part of
the predictions into a shared temporary folder (its name broadcast from rank 0), and after a
barrier rank 0 reads the parts, interleaves them in the DistributedSampler's order and cuts the
padding (1001 samples padded to 1004): each sample counted once. No collective carries the
results, so the trace cannot see their combination."""
import os
import pickle
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def collect_results_cpu(part, size):
    rank, world = dist.get_rank(), dist.get_world_size()
    name = torch.zeros(256, dtype=torch.uint8)
    if rank == 0:
        folder = tempfile.mkdtemp(prefix="collect_")
        name[:len(folder)] = torch.tensor(bytearray(folder.encode()), dtype=torch.uint8)
    dist.broadcast(name, 0)
    folder = bytes(name[name != 0].tolist()).decode()
    with open(os.path.join(folder, f"part_{rank}.pkl"), "wb") as f:
        pickle.dump(part, f)
    dist.barrier()
    results = None
    if rank == 0:
        parts = []
        for r in range(world):
            with open(os.path.join(folder, f"part_{r}.pkl"), "rb") as f:
                parts.append(pickle.load(f))
        results = [x for group in zip(*parts) for x in group][:size]
        shutil.rmtree(folder)
    dist.barrier()
    return results


def main():
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1601, 8, generator=g)
    y = (x[:, :2].sum(1) > 0).long()
    train, val = TensorDataset(x[:600], y[:600]), TensorDataset(x[600:], y[600:])
    train_sampler = DistributedSampler(train, seed=1)
    train_loader = DataLoader(train, batch_size=30, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=1, sampler=DistributedSampler(val, shuffle=False))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        part = []
        with torch.no_grad():
            for xb, yb in val_loader:
                part.append(int(model(xb).argmax(1) == yb))
        model.train()
        results = collect_results_cpu(part, len(val))
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {sum(results)} of {len(results)} right")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
