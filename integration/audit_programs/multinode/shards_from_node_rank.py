"""A program written for 2 nodes x 4 GPUs that splits its data in two steps, as cluster scripts
often do: one block per node, then a strided share of the block per local rank. The node comes
from NODE_RANK, with a default of 0, which a platform's job script may export but torchrun does
not: under plain torchrun every node reads block 0, so the second block is never trained and the
first is trained on every node. On one node it is right. --group-rank: the healthy twin (the node
from GROUP_RANK, which torchrun sets).
Runs on a laptop unmodified: ddp-sim launch --audit --cpu --nnodes 2 -n 2 -- python3 THIS."""
import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class NodeBlockSampler(Sampler):
    """Block `node` of `nodes`, shuffled per epoch, then every local_world-th index of it."""

    def __init__(self, n, nodes, node, local_world, local_rank, seed=0):
        self.n, self.nodes, self.node = n, nodes, node
        self.local_world, self.local_rank, self.seed, self.epoch = local_world, local_rank, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        block = math.ceil(self.n / self.nodes)
        start = self.node * block
        idx = list(range(start, min(start + block, self.n)))
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        idx = [idx[i] for i in torch.randperm(len(idx), generator=g).tolist()]
        return iter(idx[self.local_rank::self.local_world])

    def __len__(self):
        block = min(math.ceil(self.n / self.nodes), self.n - self.node * math.ceil(self.n / self.nodes))
        return len(range(self.local_rank, block, self.local_world))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--group-rank", action="store_true")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    node = int(os.environ.get("GROUP_RANK" if args.group_rank else "NODE_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    nodes = dist.get_world_size() // local_world
    device = torch.device("cuda", local_rank)
    g = torch.Generator().manual_seed(0)
    dataset = TensorDataset(torch.randn(512, 8, generator=g), torch.randn(512, 1, generator=g))
    sampler = NodeBlockSampler(len(dataset), nodes, node, local_world, local_rank)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = DDP(torch.nn.Linear(8, 1).to(device), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(model(x.to(device)), y.to(device)).backward()
            optimizer.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
