#!/usr/bin/env python3
"""Writes the audit trace of a large synthetic run, for the --html report's size and render figures.

W ranks of torch's DistributedSampler over N samples (shuffle, seed 0), batch size B, E epochs,
one gradient allreduce per step. Optionally the last rank stops --short-by batches early (an
uneven run: its last allreduces have no partner). Times ("t"): a step takes 50 ms on every rank;
rank r computes 30-45 ms of it (30 + 15 * (r mod 97) / 96) and waits in the allreduce for the rest. Batch lines carry no indices: the reader
recomputes DistributedSampler's order, as for a real PyTorch program.

  html_report_trace.py DIR [-N 1000000] [-W 512] [-B 64] [--epochs 1] [--short-by 0]
  ddp-sim audit DIR --html page.html     (docs/html-report.md: the figures)
"""

import argparse
import json
import os


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("-N", type=int, default=1_000_000)
    p.add_argument("-W", type=int, default=512)
    p.add_argument("-B", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--short-by", type=int, default=0)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=False)
    per_rank = -(-a.N // a.W)
    batches = -(-per_rank // a.B)
    for r in range(a.W):
        lines = [{"ev": "header", "t": 0.0, "trace": "ddph-audit", "version": 1, "rank": r,
                  "world_size": a.W, "run_id": "synthetic", "pid": 1000 + r,
                  "producer": "html_report_trace.py", "runtime": "synthetic", "argv": ["train.py"]},
                 {"ev": "sampler", "t": 0.0, "id": 0,
                  "class": "torch.utils.data.distributed.DistributedSampler", "dataset_len": a.N,
                  "num_replicas": a.W, "rank": r, "seed": 0, "shuffle": True, "drop_last": False,
                  "order": "torch-distributed"},
                 {"ev": "loader", "t": 0.0, "id": 0, "sampler": 0, "dataset": "synthetic",
                  "dataset_len": a.N, "batch_size": a.B, "drop_last": False, "num_workers": 0,
                  "batching": "torch"}]
        seq = 0
        step = 0
        compute = 0.030 + 0.015 * (r % 97) / 96
        now = 0.0
        for e in range(a.epochs):
            lines.append({"ev": "set_epoch", "t": 0.0, "sampler": 0, "epoch": e})
            lines.append({"ev": "epoch", "t": 0.0, "loader": 0, "iter": e, "sampler_epoch": e,
                          "seed": 0, "num_replicas": a.W, "rank": r, "shuffle": True,
                          "drop_last": False, "dataset_len": a.N, "batches": batches})
            taken = batches - (a.short_by if r == a.W - 1 and e == a.epochs - 1 else 0)
            for b in range(taken):
                size = min(a.B, per_rank - b * a.B)
                start = 0.05 * step
                lines.append({"ev": "batch", "t": round(start, 6), "loader": 0, "iter": e, "seq": b,
                              "size": size, "grad": True})
                lines.append({"ev": "coll", "t": round(start + compute, 6), "group": "0", "seq": seq,
                              "op": "all_reduce", "dtype": "float32", "numel": 1024, "src": "user"})
                now = round(start + 0.05, 6)
                lines.append({"ev": "coll_done", "t": now, "group": "0", "seq": seq})
                seq += 1
                step += 1
            if taken == batches:
                lines.append({"ev": "epoch_end", "t": now, "loader": 0, "iter": e, "batches": batches})
        lines.append({"ev": "end", "t": now, "code": 0})
        with open(os.path.join(a.dir, f"rank-{r}.jsonl"), "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))


if __name__ == "__main__":
    main()
