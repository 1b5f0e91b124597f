"""A bag-of-tokens classifier whose nn.Embedding has max_norm=1.0: its forward renormalises, in
place, the rows the batch looks up. Under DDP each rank looks up other tokens, so each changes
other rows outside the gradient allreduce: the replicas part from the first step.
--renorm-after-step: the healthy twin (no max_norm; every row renormalised after the step, alike
on every rank)."""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Bag(nn.Module):
    def __init__(self, max_norm):
        super().__init__()
        self.emb = nn.Embedding(200, 16, max_norm=max_norm)
        self.out = nn.Linear(16, 2)

    def forward(self, tokens):
        return self.out(self.emb(tokens).mean(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--renorm-after-step", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    tokens = torch.randint(0, 200, (512, 8))
    data = TensorDataset(tokens, (tokens.float().mean(1) > 100).long())
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    net = Bag(None if args.renorm_after_step else 1.0)
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            if args.renorm_after_step:
                with torch.no_grad():
                    net.emb.weight.renorm_(2, 0, 1.0)
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
