"""Each rank draws its own training chunk of a large generated corpus, seeded from LOCAL_RANK (as
the launch script of a single-node job did), so no DistributedSampler is needed. On one node the
chunks differ; on two, local rank k of every node draws the same chunk: the nodes train on the
same samples. --global-rank seeds from RANK (the healthy twin)."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--global-rank", action="store_true")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    if torch.cuda.is_available():
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    corpus_x = torch.randn(4096, 8, generator=torch.Generator().manual_seed(0))
    corpus = TensorDataset(corpus_x, (corpus_x[:, 0] > 0).long())
    seed = dist.get_rank() if args.global_rank else local_rank
    chunk = torch.randperm(len(corpus), generator=torch.Generator().manual_seed(seed))[:256]
    loader = DataLoader(Subset(corpus, chunk.tolist()), batch_size=32, shuffle=True)
    model = DDP(nn.Linear(8, 2).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb.to(device)), yb.to(device)).backward()
            opt.step()
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
