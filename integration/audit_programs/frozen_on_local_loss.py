"""Progressive freezing: once the encoder has converged, freeze it (requires_grad_(False)) and
train only the head. Each rank decides from its own smoothed loss, so the ranks freeze at
different steps: the first rank to freeze no longer produces the encoder's gradients, DDP's bucket
never becomes ready there and that rank never joins the gradient all_reduce the others wait in
(DDP raises "Expected to have finished reduction in the prior iteration" at its next forward).
--agreed: the healthy twin (the smoothed loss is averaged over the ranks before deciding, and
the model wrapped in DDP again once frozen)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--agreed", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1024, 8, generator=g)
    y = (x[:, :2].sum(1) > 0).long()
    sampler = DistributedSampler(TensorDataset(x, y), seed=2)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, sampler=sampler)
    torch.manual_seed(0)
    net = Net()
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    smoothed, first, frozen = None, None, False
    for epoch in range(4):
        sampler.set_epoch(epoch)
        for step, (xb, yb) in enumerate(loader):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            value = loss.detach()
            if args.agreed:
                dist.all_reduce(value)
                value /= dist.get_world_size()
            smoothed = value if smoothed is None else 0.8 * smoothed + 0.2 * value
            first = first if first is not None else float(smoothed)
            if not frozen and float(smoothed) < 0.5 * first:
                net.encoder.requires_grad_(False)
                frozen = True
                if args.agreed:  # DDP reduces what required gradients when it was built
                    model = DDP(net)
                print(f"rank {rank}: encoder frozen at epoch {epoch} step {step}", flush=True)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
