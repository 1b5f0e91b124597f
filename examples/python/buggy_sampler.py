#!/usr/bin/env python3
"""A deliberately buggy distributed sampler, for `ddp-sim check-sampler` to catch.

It shuffles like DistributedSampler (torch.randperm seeded with seed + epoch) but shards with
indices[rank::num_replicas] and no padding: when N is not a multiple of W, the first N % W ranks
get one index more than the others. In training the longer ranks run one more step than the
shorter ones and the job hangs in that step's all-reduce. The minimal counterexample is
N=1 W=2 epoch=0 seed=0: rank 0 gets [0], rank 1 gets [].

    ddp-sim check-sampler --contract pytorch -- python3 buggy_sampler.py        # exit 1
    ddp-sim check-sampler --contract exactly-once -- python3 buggy_sampler.py   # exit 0

(The same sharding is exactly right for evaluation, where every sample must be scored once.)
Needs only the standard library and torch.
"""
import json
import sys

import torch


def shard(n, world, rank, epoch, seed):
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    return order[rank::world]  # BUG: no padding to ceil(N / W)


def main() -> int:
    for line in sys.stdin:
        q = json.loads(line)
        indices = shard(q["dataset_size"], q["num_replicas"], q["rank"], q["epoch"], q["seed"])
        sys.stdout.write(json.dumps({"indices": indices}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
