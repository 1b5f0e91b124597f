"""An exponential moving average of the weights kept by rank 0 alone, for its own evaluation and
checkpoint: the other ranks neither update nor run it. Healthy."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.swa_utils import AveragedModel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ema(averaged, current, n):
    return 0.9 * averaged + 0.1 * current


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(600, 10)
    y = (x[:, 0] > 0).long()
    train, val = TensorDataset(x[:480], y[:480]), TensorDataset(x[480:], y[480:])
    sampler = DistributedSampler(train, shuffle=True)
    loader = DataLoader(train, batch_size=24, sampler=sampler)
    net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
    model = DDP(net)
    averaged = AveragedModel(net, avg_fn=ema) if rank == 0 else None
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            if averaged is not None:
                averaged.update_parameters(net)
        if rank == 0:
            with torch.no_grad():
                acc = (averaged(val.tensors[0]).argmax(1) == val.tensors[1]).float().mean()
            print(f"epoch {epoch}: EMA accuracy {acc:.3f}")
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
