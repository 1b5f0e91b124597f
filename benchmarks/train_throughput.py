"""Training throughput of Python's torch DDP on MNIST, and the driver that compares ddp-train with it.

The Python peer of `ddp-train` (reference/): the same MLP 784-128-10 (Linear, ReLU, Linear),
cross-entropy, SGD lr 0.01, batch 64 per rank, MNIST pixels scaled to [0, 1], one
DistributedSampler(shuffle=True, seed, drop_last=False) with set_epoch per epoch, one torch thread
per rank, W rank processes with gloo over env:// on 127.0.0.1 (W = 1: one process, no process
group, as ddp-train runs without torchrun's variables). Two ways of feeding batches:

  dataloader  DataLoader(TensorDataset(x, y), batch_size=64, sampler=sampler), as users write it
  index       the sampler's indices in chunks of 64, each batch gathered by indexing the in-memory
              tensors (x[idx]) -- what ddp-train does, so the comparison of the training loops is
              like for like

Each run trains `--warmup` steps, then `--steps` timed steps between two barriers; samples/s is
global: samples of all ranks in the timed steps over the timed seconds. The MNIST IDX files are read
with numpy (torchvision is not needed). Every wait has a deadline: process-group init and
collectives (`--timeout`), and the rank processes as a whole (killed when past it).

  python3 train_throughput.py                          Python peer only, prints its figures
  python3 train_throughput.py --ddp-train B --ddp-sim S  also ddp-train (run_train_benchmark.sh)
"""
import argparse
import datetime
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from bench_env import blas_in_use

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# ---------------------------------------------------------------------------------------------
# The rank program (imports torch lazily so the driver's start-up stays cheap).

def read_idx(path):
    """An IDX file (MNIST's format) as a numpy array: magic 0x0000 08 ndim, big-endian dims."""
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist(mnist_dir):
    import torch
    images = read_idx(os.path.join(mnist_dir, "train-images-idx3-ubyte"))
    labels = read_idx(os.path.join(mnist_dir, "train-labels-idx1-ubyte"))
    x = torch.from_numpy(images.reshape(len(images), 784).astype("float32") / 255.0)
    y = torch.from_numpy(labels.astype("int64"))
    return x, y


def batches(variant, x, y, sampler, batch_size):
    """The rank's batches of one epoch (sampler.set_epoch already called)."""
    import torch
    if variant == "dataloader":
        from torch.utils.data import DataLoader, TensorDataset
        yield from DataLoader(TensorDataset(x, y), batch_size=batch_size, sampler=sampler)
    else:
        indices = torch.tensor(list(sampler), dtype=torch.long, device=x.device)
        for start in range(0, len(indices), batch_size):
            idx = indices[start:start + batch_size]
            yield x[idx], y[idx]


def rank_main(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.utils.data.distributed import DistributedSampler

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=args.timeout)
    t0 = time.perf_counter()
    # --backend nccl (a GPU machine, scripts/gpu-check.sh): one GPU per rank, the data on it for
    # the index variant; the DataLoader variant moves each batch, as users' loops do.
    device = torch.device("cuda", local_rank) if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if world > 1:
        dist.init_process_group(args.backend, init_method="env://", rank=rank, world_size=world,
                                timeout=timeout)
    x, y = load_mnist(args.mnist_dir)
    if args.variant == "index":
        x, y = x.to(device), y.to(device)
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(784, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    model = model.to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    sampler = DistributedSampler(x, num_replicas=world, rank=rank, shuffle=True, seed=args.seed,
                                 drop_last=False)
    setup_s = time.perf_counter() - t0

    total = args.warmup + args.steps
    step, samples, all_samples, start, loss = 0, 0, 0, None, None
    epoch = 0
    first = time.perf_counter()
    while step < total:
        sampler.set_epoch(epoch)
        for inputs, targets in batches(args.variant, x, y, sampler, args.batch_size):
            if step == args.warmup:
                sync()
                if world > 1:
                    dist.barrier()
                start = time.perf_counter()
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            if step >= args.warmup:
                samples += len(targets)
            all_samples += len(targets)
            step += 1
            if step == total:
                break
        epoch += 1
    sync()
    if world > 1:
        dist.barrier()
    end = time.perf_counter()
    seconds = end - start
    # Every rank has the same batch sizes (DistributedSampler pads), so global = W * rank 0's.
    result = {"variant": args.variant, "world_size": world, "steps": args.steps,
              "warmup": args.warmup, "epochs_started": epoch, "samples": samples * world,
              "seconds": seconds, "samples_per_s": samples * world / seconds,
              "setup_s": setup_s, "last_loss": float(loss),
              # ddp-train's definition: every step, warm-up included, setup excluded
              "whole_run_samples_per_s": all_samples * world / (end - first)}
    if world > 1:
        dist.destroy_process_group()
    if rank == 0 and args.out:
        with open(args.out + ".tmp", "w") as f:
            json.dump(result, f)
        os.rename(args.out + ".tmp", args.out)
    return 0


# ---------------------------------------------------------------------------------------------
# The driver.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_bounded(cmds_envs, deadline_s, what, tmp):
    """Starts every (cmd, env) and waits for all of them within deadline_s. The first one to fail,
    or the deadline, kills the rest. Returns None on success, else a one-line reason."""
    procs = []
    for i, (cmd, env) in enumerate(cmds_envs):
        err = open(os.path.join(tmp, f"stderr-{i}.txt"), "w+")
        procs.append((subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                       start_new_session=True), err))
    end = time.monotonic() + deadline_s
    reason = None
    try:
        while reason is None and any(p.poll() is None for p, _ in procs):
            for i, (p, err) in enumerate(procs):
                if p.poll() not in (None, 0):
                    err.seek(0)
                    lines = err.read().strip().splitlines()
                    reason = f"{what}: process {i} exited {p.returncode}: " + \
                        (lines[-1] if lines else "(no output)")
                    break
            if reason is None and time.monotonic() > end:
                reason = f"{what}: still running after {deadline_s:.0f} s"
            time.sleep(0.05)
        if reason is None:
            for i, (p, err) in enumerate(procs):
                if p.returncode != 0:
                    err.seek(0)
                    lines = err.read().strip().splitlines()
                    reason = f"{what}: process {i} exited {p.returncode}: " + \
                        (lines[-1] if lines else "(no output)")
                    break
    finally:
        for p, err in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
            err.close()
    return reason


def python_run(args, world, variant, tmp):
    out = os.path.join(tmp, f"py-{variant}-{world}.json")
    port = free_port()
    cmds = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        if world == 1:
            for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
                env.pop(k)
        cmds.append(([sys.executable, os.path.abspath(__file__), "--rank-worker",
                      "--variant", variant, "--steps", str(args.steps), "--warmup",
                      str(args.warmup), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
                      "--seed", str(args.seed), "--hidden", str(args.hidden),
                      "--backend", args.backend, "--mnist-dir",
                      args.mnist_dir, "--timeout", str(args.timeout), "--out", out], env))
    reason = run_bounded(cmds, args.run_deadline, f"python {variant} W={world}", tmp)
    if reason:
        raise RuntimeError(reason)
    with open(out) as f:
        return json.load(f)


def cpp_run(args, world, tmp):
    """ddp-train (via ddp-sim launch for W > 1) with --steps warmup+steps; its samples_per_s is
    over the whole run (all steps, setup and evaluation excluded)."""
    report = os.path.join(tmp, f"cpp-{world}.json")
    train = [args.ddp_train, "--dataset", "mnist", "--mnist-dir", args.mnist_dir,
             "--epochs", "1000", "--steps", str(args.warmup + args.steps), "--batch-size",
             str(args.batch_size), "--lr", str(args.lr), "--seed", str(args.seed),
             "--hidden", str(args.hidden), "--threads", "1", "--no-eval", "--progress", "none",
             "--backend", args.backend,
             "--report-json", report]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    if world > 1:
        cmd = [args.ddp_sim, "launch", "-n", str(world), "--timeout", str(args.run_deadline),
               "--", *train]
    else:
        cmd = train
    reason = run_bounded([(cmd, env)], args.run_deadline + 30, f"ddp-train W={world}", tmp)
    if reason:
        raise RuntimeError(reason)
    with open(report) as f:
        data = json.load(f)
    if data.get("world_size") != world:
        raise RuntimeError(f"ddp-train W={world}: report says world_size {data.get('world_size')}")
    steps = sum(e.get("steps", 0) for e in data.get("epochs", []))
    return {"samples_per_s": float(data["samples_per_s"]), "steps": steps}


def torchvision_note():
    try:
        import torchvision  # noqa: F401  (only reported: nothing here depends on it)
        return f"torchvision {torchvision.__version__} importable (not used)"
    except ImportError:
        return "torchvision not importable (not needed)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddp-train", help="path of ddp-train (also runs and compares it)")
    parser.add_argument("--ddp-sim", help="path of ddp-sim (launches ddp-train for W > 1)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--variants", nargs="+", default=["dataloader", "index"],
                        choices=["dataloader", "index"])
    parser.add_argument("--steps", type=int, default=600, help="timed steps (default 600)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed steps first (default 50)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs; median printed")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo",
                        help="gloo: CPU ranks (default); nccl: one GPU per rank (both sides)")
    parser.add_argument("--mnist-dir", default=os.path.join(REPO, "data", "mnist"))
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="deadline of process-group init and every collective, s")
    parser.add_argument("--run-deadline", type=float, default=600.0,
                        help="deadline of one whole run (all its rank processes), s")
    parser.add_argument("--json", help="also write every measurement here")
    parser.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="index", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.mnist_dir = os.path.abspath(args.mnist_dir)
    if args.rank_worker:
        return rank_main(args)

    if not os.path.isfile(os.path.join(args.mnist_dir, "train-images-idx3-ubyte")):
        print(f"train_throughput.py: error: no MNIST in {args.mnist_dir} "
              "(run scripts/fetch-mnist.sh)", file=sys.stderr)
        return 2
    if args.steps <= 0 or args.warmup < 0 or args.repeats <= 0 or min(args.worlds) <= 0:
        print("train_throughput.py: error: --steps, --repeats, --worlds must be positive",
              file=sys.stderr)
        return 2
    with_cpp = bool(args.ddp_train)
    if with_cpp:
        for name, path in (("ddp-train", args.ddp_train), ("ddp-sim", args.ddp_sim)):
            if not path or not os.access(path, os.X_OK):
                print(f"train_throughput.py: error: {name} is not an executable: {path} "
                      "(build it: cmake --build build --target ddp-train ddp-sim)",
                      file=sys.stderr)
                return 2

    import torch
    measured = {}  # (side, world) -> [samples/s]
    whole = {}  # Python's samples/s over every step, warm-up included (ddp-train's definition)
    try:
        with tempfile.TemporaryDirectory(prefix="ddph-train-bench-") as tmp:
            for rep in range(args.repeats):
                for w in args.worlds:
                    if with_cpp:
                        r = cpp_run(args, w, tmp)
                        measured.setdefault(("ddp-train", w), []).append(r["samples_per_s"])
                    for v in args.variants:
                        r = python_run(args, w, v, tmp)
                        measured.setdefault((f"py-{v}", w), []).append(r["samples_per_s"])
                        whole.setdefault((f"py-{v}", w), []).append(r["whole_run_samples_per_s"])
                    print(f"  repeat {rep + 1}/{args.repeats} W={w}: " + ", ".join(
                        f"{side} {vals[-1]:.0f}" for (side, ww), vals in measured.items()
                        if ww == w), file=sys.stderr, flush=True)
    except RuntimeError as e:
        print(f"train_throughput.py: error: {e}", file=sys.stderr)
        return 1

    med = {k: statistics.median(v) for k, v in measured.items()}
    print(f"MNIST MLP 784-{args.hidden}-10, SGD lr {args.lr}, batch {args.batch_size} per rank, "
          f"1 torch thread per rank, {args.backend} on 127.0.0.1; Python: {args.warmup} warm-up + "
          f"{args.steps} timed steps; ddp-train: --steps {args.warmup + args.steps}, whole run; "
          f"median of {args.repeats}; torch {torch.__version__}, {os.cpu_count()} CPUs; "
          f"BLAS {blas_in_use()}; {torchvision_note()}")
    print(f"global training samples/s (all ranks), median of {args.repeats}")
    cols = (["ddp-train"] if with_cpp else []) + [f"py-{v}" for v in args.variants]
    header = f"{'':6}" + "".join(f"{c:>15}" for c in cols)
    if with_cpp:
        header += "".join(f"{'C++/' + c:>20}" for c in cols[1:])
    print(header)
    # The goal is against Python DDP as users write it (a DataLoader over the dataset with
    # a DistributedSampler); the direct-indexing loop is the stricter peer, printed beside it.
    goal = {c: True for c in cols[1:]}
    for w in args.worlds:
        line = f"{'W=' + str(w):6}" + "".join(f"{med[(c, w)]:15.0f}" for c in cols)
        if with_cpp:
            for c in cols[1:]:
                ratio = med[("ddp-train", w)] / med[(c, w)]
                goal[c] = goal[c] and ratio >= 1.5
                line += f"{ratio:20.2f}"
        print(line)
    if with_cpp:
        for c in cols[1:]:
            print(f"ddp-train at least 1.5x {c} at every W: {'yes' if goal[c] else 'no'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items() if k not in ("out",)},
                       "samples_per_s": [{"side": s, "world_size": w, "values": v,
                                          "median": statistics.median(v)}
                                         for (s, w), v in measured.items()],
                       "python_whole_run_samples_per_s": [
                           {"side": s, "world_size": w, "values": v,
                            "median": statistics.median(v)} for (s, w), v in whole.items()]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
