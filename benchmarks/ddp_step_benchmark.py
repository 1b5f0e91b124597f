"""Python peer of ddp_step_benchmark (torch DDP, gloo) and the driver that prints the ratios.

Same model (MLP 784-128-10), batch (64 per rank), optimizer (SGD 0.01), loss (cross-entropy),
one thread per rank, step counts and warmup as the C++ program; W > 1 uses
torch.multiprocessing.spawn with gloo on 127.0.0.1. Measurements of both are interleaved,
`--repeats` times, and the median is printed, because this machine is shared and noisy.

Usage: python3 ddp_step_benchmark.py --cpp build/bin/ddp_step_benchmark
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_env import blas_in_use

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def train_loop(model, steps, warmup, batch, rank, synced):
    torch.manual_seed(100 + rank)
    inputs = [torch.rand(batch, 784) for _ in range(8)]
    targets = [torch.randint(0, 10, (batch,)) for _ in range(8)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs[i % 8]), targets[i % 8])
        loss.backward()
        optimizer.step()

    for i in range(warmup):
        step(i)
    if synced:
        dist.barrier()
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    if synced:
        dist.barrier()
    return (time.perf_counter() - start) * 1000.0 / steps


def rank_main(rank, world, port, steps, warmup, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    model = nn.parallel.DistributedDataParallel(make_model())
    ms = train_loop(model, steps, warmup, 64, rank, True)
    if rank == 0:
        with open(out + ".tmp", "w") as f:
            f.write(f"{ms}\n")
        os.rename(out + ".tmp", out)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def py_plain(steps, warmup):
    torch.set_num_threads(1)
    return train_loop(make_model(), steps, warmup, 64, 0, False)


def py_ddp(world, steps, warmup):
    with tempfile.TemporaryDirectory(prefix="ddph-py-bench-") as d:
        out = os.path.join(d, "rank0.ms")
        mp.spawn(rank_main, args=(world, free_port(), steps, warmup, out), nprocs=world, join=True)
        with open(out) as f:
            return float(f.read())


def cpp_run(binary, steps, warmup, worlds):
    text = subprocess.run([binary, "--steps", str(steps), "--warmup", str(warmup), "--worlds",
                           *[str(w) for w in worlds]], check=True, capture_output=True,
                          text=True, timeout=900).stdout
    result = {}
    for line in text.splitlines():
        _, mode, w, ms = line.split()
        result[(mode, int(w.split("=")[1]))] = float(ms.split("=")[1])
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpp", required=True, help="path of ddp_step_benchmark")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    if not os.access(args.cpp, os.X_OK):
        print(f"ddp_step_benchmark.py: error: {args.cpp} is not an executable "
              "(build it first: scripts/build.sh)", file=sys.stderr)
        return 2
    cpp, py = {}, {}
    for rep in range(args.repeats):
        for key, ms in cpp_run(args.cpp, args.steps, args.warmup, args.worlds).items():
            cpp.setdefault(key, []).append(ms)
        py.setdefault(("plain", 1), []).append(py_plain(args.steps, args.warmup))
        for w in args.worlds:
            py.setdefault(("ddp", w), []).append(py_ddp(w, args.steps, args.warmup))
    med = {k: statistics.median(v) for k, v in cpp.items()}
    pmed = {k: statistics.median(v) for k, v in py.items()}
    print(f"MLP 784-128-10, batch 64 per rank, 1 thread per rank, gloo, {args.steps} timed steps, "
          f"median of {args.repeats} interleaved runs; torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs; BLAS {blas_in_use()}")
    print(f"{'':10}{'C++ ms/step':>12}{'Py ms/step':>12}{'C++ DDP/plain':>15}"
          f"{'Py DDP/plain':>14}{'Py/C++':>9}")
    print(f"{'plain W=1':10}{med[('plain', 1)]:12.3f}{pmed[('plain', 1)]:12.3f}{'':15}{'':14}"
          f"{pmed[('plain', 1)] / med[('plain', 1)]:9.2f}")
    ok = True
    for w in args.worlds:
        c, p = med[("ddp", w)], pmed[("ddp", w)]
        ok = ok and p / c >= 1.5
        print(f"{'DDP W=' + str(w):10}{c:12.3f}{p:12.3f}{c / med[('plain', 1)]:15.2f}"
              f"{p / pmed[('plain', 1)]:14.2f}{p / c:9.2f}")
    print(f"goal (C++ DDP step at least 1.5x faster than Python's at every W): "
          f"{'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
