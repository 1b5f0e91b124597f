"""Overhead of the audit recorder: the same runs under `ddp-sim launch -n W` bare and under
`ddp-sim launch --audit --trace-dir DIR -n W`, interleaved, with ratios audited/bare of one run.

What is measured:

  python     an MNIST-sized Python DDP loop (this file's rank program): MLP 784-128-10, SGD lr
             0.01, batch 64 per rank, DataLoader(TensorDataset(x, y), sampler=DistributedSampler
             (shuffle=True, seed 0)) with set_epoch per pass, gloo over env:// on 127.0.0.1, one
             torch thread per rank, DistributedDataParallel at every W (W = 1 too: the program sees
             WORLD_SIZE=1 from the launcher, as under `torchrun -n 1`). The MNIST IDX files are
             read by train_throughput.py's reader. Each rank trains `--warmup` steps, then
             `--steps` timed steps between two barriers (crossing epochs as needed); rank 0 prints
             one JSON line (seconds, steps). The ratio is of those loop seconds.
  ddp-train  build/bin/ddp-train --dataset mnist --epochs 1 --no-eval --progress none --threads 1
             --report-json R (C++ recorder, DDPH_AUDIT_DIR); the ratio is of its report's
             `train_seconds` (the epoch's training loop, setup excluded).
  wall       beside both: the launcher's whole run as a process (Python start, torch import, MNIST
             load, process group; for the audited run also `ddp-sim launch`'s own audit of the
             trace after the ranks ended).
  bytes      trace bytes per rank per step: the sum of the rank-*.jsonl files / steps of the run
             (warm-up included for the Python loop) / W.
  audit      `ddp-sim audit DIR` alone (the verifier, after the ranks ended; in no ratio) on the
             largest trace of the run, median of --repeats.
  --big      a compactness check: DistributedSampler over a 10^7-item Dataset (__getitem__ returns
             the index), DataLoader batch_size 1024, set_epoch(0), iter(loader), 200 batches then
             break, at W = 2, bare vs audited: trace bytes and the time of iter(loader), of the
             first batch (the sampler's permutation of 10^7 is drawn there) and of the 200 batches.
             The recorder records DistributedSampler's order by reference (its parameters), so
             neither time nor bytes may grow with the dataset.
  --emulation  the CPU emulation of CUDA (`launch --cpu`, docs/cpu-emulation.md), not audited:
             the Python loop bare, the same loop under --cpu (goal <= 1.03: a CPU program pays
             almost nothing), and the loop written for GPUs (set_device(LOCAL_RANK), nccl,
             .to(local_rank), DDP(device_ids=[local_rank])) under --cpu against the bare CPU loop,
             its hand port (goal <= 1.05). The three run back to back, their order rotating.

Every configuration runs bare and audited back to back, the order alternating between repeats
(A B, B A, ...) to cancel drift on a shared machine; medians of --repeats are printed. Goal: the
audited/bare ratio of the training loop <= 1.05 (1.10 at the very least). Every wait has a
deadline (`ddp-sim launch --timeout`, process-group init and collectives, the launcher process
as a whole: killed when past it); temporary folders are removed.

  benchmarks/run_audit_benchmark.sh [--repeats 3] [--worlds 1 2 4] [--steps N] [--json F]
  benchmarks/run_audit_benchmark.sh --big
  benchmarks/run_audit_benchmark.sh --emulation [--worlds 2] [--repeats 5]
"""
import argparse
import datetime
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MARK = "ddph-audit-bench"  # key of the rank-0 result line on stdout


def torch_version(python):
    """The ranks' torch version (the driver itself needs no torch)."""
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300)
    return out.stdout.strip() or "unknown"


# ---------------------------------------------------------------------------------------------
# The rank programs (torch imported inside, so the driver's start-up stays cheap; the recorder's
# import hooks patch torch when the program imports it, as in any user script).

def rank_mnist(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler
    sys.path.insert(0, HERE)
    from train_throughput import load_mnist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    # --gpu-style: the loop as written for GPUs (run under --cpu); else the CPU loop.
    device = int(os.environ["LOCAL_RANK"]) if args.gpu_style else "cpu"
    if args.gpu_style:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if args.gpu_style else "gloo", init_method="env://", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=args.timeout))
    x, y = load_mnist(args.mnist_dir)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    model = nn.parallel.DistributedDataParallel(
        net, device_ids=[device] if args.gpu_style else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank,
                                 shuffle=True, seed=0, drop_last=False)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, sampler=sampler)

    total = args.warmup + args.steps
    step, epoch, start = 0, 0, None
    while step < total:
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            if step == args.warmup:
                dist.barrier()
                start, cpu0 = time.perf_counter(), time.process_time()
            if args.gpu_style:
                inputs, targets = inputs.to(device, non_blocking=True), targets.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            step += 1
            if step == total:
                break
        epoch += 1
    dist.barrier()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
    if rank == 0:
        print(json.dumps({MARK: "mnist", "world_size": world, "seconds": seconds,
                          "cpu_s": cpu, "steps": args.steps, "warmup": args.warmup, "total_steps": total,
                          "epochs_started": epoch, "last_loss": float(loss)}), flush=True)
    del model  # the DDP module goes first: docs/audit.md, "DDP alive at destroy_process_group"
    dist.destroy_process_group()
    return 0


def rank_big(args):
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler

    class IndexDataset(Dataset):
        """n items; item i is i (no data: only the sampler and the loader cost time)."""

        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return i

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    dataset = IndexDataset(args.big_n)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=1024, sampler=sampler)
    dist.barrier()
    t0 = time.perf_counter()
    sampler.set_epoch(0)
    it = iter(loader)
    t1 = time.perf_counter()
    next(it)
    t2 = time.perf_counter()
    n = 1
    for _ in it:
        n += 1
        if n == args.big_batches:
            break
    t3 = time.perf_counter()
    dist.barrier()
    if rank == 0:
        print(json.dumps({MARK: "big", "world_size": world, "dataset": args.big_n,
                          "batches": n, "iter_s": t1 - t0, "first_batch_s": t2 - t1,
                          "batches_s": t3 - t0}), flush=True)
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------------------------
# The driver.

def base_env():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in list(env):
        if k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "TORCHELASTIC_RUN_ID") or k.startswith("DDPH_AUDIT"):
            del env[k]
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def only_allowed(audit_output, allowed_findings):
    """True when the audit's findings (`FAIL <property> ...` lines) are all of allowed_findings."""
    findings = [ln.split() for ln in audit_output.splitlines() if ln.strip().startswith("FAIL ")]
    return bool(findings) and all(len(f) > 1 and f[1] in allowed_findings for f in findings)


def ranks_exited_0(trace):
    try:
        with open(os.path.join(trace, "launch.json")) as f:
            ranks = json.load(f)["ranks"]
        return bool(ranks) and all(r.get("outcome") == "exited" and r.get("code") == 0
                                   for r in ranks)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def run_launch(args, world, program, audited, tmp, what, allowed_findings=(), flags=()):
    """One `ddp-sim launch [--audit --trace-dir T] [flags] -n W -- program`, within --run-deadline.
    Exit 0 expected; with --audit also exit 1 when every rank exited 0 and the audit's only
    findings (`FAIL <property> ...` lines) are of `allowed_findings`.
    Returns (stdout text, wall seconds, trace dir or None)."""
    cmd = [args.ddp_sim, "launch", "-n", str(world), "--master-port", str(free_port()),
           "--timeout", str(args.run_deadline)]
    trace = None
    if audited:
        trace = tempfile.mkdtemp(prefix="trace-", dir=tmp)
        cmd += ["--audit", "--trace-dir", trace]
    cmd += [*flags, "--", *program]
    out_path = os.path.join(tmp, "launch-stdout.txt")
    err_path = os.path.join(tmp, "launch-stderr.txt")
    with open(out_path, "w+") as out, open(err_path, "w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=base_env(), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=args.run_deadline + 60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise RuntimeError(f"{what}: still running after {args.run_deadline + 60:.0f} s")
        finally:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read()
        if rc == 1 and audited and only_allowed(text, allowed_findings) and \
                ranks_exited_0(trace):
            rc = 0  # only the expected finding (see python_run)
        if rc != 0:
            err.seek(0)
            lines = (err.read() + text).strip().splitlines()
            raise RuntimeError(f"{what}: ddp-sim launch exited {rc}: " +
                               (" | ".join(lines[-4:]) if lines else "(no output)"))
    return text, wall, trace


def result_line(text, what):
    for line in reversed(text.splitlines()):
        i = line.find("{")
        if i >= 0 and MARK in line:
            return json.loads(line[i:])
    raise RuntimeError(f"{what}: no result line from rank 0")


def trace_bytes(trace, world):
    files = [os.path.join(trace, f"rank-{r}.jsonl") for r in range(world)]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise RuntimeError(f"no trace file {missing[0]}")
    return sum(os.path.getsize(f) for f in files)


def python_run(args, world, audited, tmp, flags=(), gpu_style=False):
    what = f"python W={world} {'audited' if audited else 'bare'} {' '.join(flags)}"
    program = [args.python, os.path.abspath(__file__), "--rank-worker", "mnist", "--steps",
               str(args.steps), "--warmup", str(args.warmup), "--mnist-dir", args.mnist_dir,
               "--timeout", str(args.timeout)] + (["--gpu-style"] if gpu_style else [])
    # The loop stops after --warmup + --steps steps, inside an epoch: the audit rightly reports
    # that pass's unseen samples (coverage); that finding, and only it, is expected here.
    text, wall, trace = run_launch(args, world, program, audited, tmp, what,
                                   allowed_findings=("coverage",), flags=flags)
    r = result_line(text, what)
    out = {"seconds": r["seconds"], "cpu": r["cpu_s"], "wall": wall, "steps": r["total_steps"]}
    if trace:
        out["bytes"] = trace_bytes(trace, world)
        out["trace"] = trace
    return out


def cpp_run(args, world, audited, tmp):
    what = f"ddp-train W={world} {'audited' if audited else 'bare'}"
    report = os.path.join(tmp, "report.json")
    if os.path.exists(report):
        os.remove(report)
    program = [args.ddp_train, "--dataset", "mnist", "--mnist-dir", args.mnist_dir, "--epochs",
               "1", "--no-eval", "--progress", "none", "--threads", "1", "--timeout",
               str(args.timeout), "--report-json", report]
    _, wall, trace = run_launch(args, world, program, audited, tmp, what)
    with open(report) as f:
        data = json.load(f)
    if data.get("world_size") != world:
        raise RuntimeError(f"{what}: report says world_size {data.get('world_size')}")
    out = {"seconds": float(data["train_seconds"]), "wall": wall,
           "steps": int(data["global_steps"])}
    if trace:
        out["bytes"] = trace_bytes(trace, world)
        out["trace"] = trace
    return out


def big_run(args, audited, tmp):
    world = 2
    what = f"big W={world} {'audited' if audited else 'bare'}"
    program = [args.python, os.path.abspath(__file__), "--rank-worker", "big", "--big-n",
               str(args.big_n), "--big-batches", str(args.big_batches), "--timeout",
               str(args.timeout)]
    text, wall, trace = run_launch(args, world, program, audited, tmp, what,
                                   allowed_findings=("coverage",))
    r = result_line(text, what)
    out = {k: r[k] for k in ("iter_s", "first_batch_s", "batches_s", "batches")}
    out["wall"] = wall
    if trace:
        out["bytes"] = trace_bytes(trace, world)
        out["trace"] = trace
    return out


def audit_seconds(args, trace, tmp, allowed_findings=()):
    """Median seconds of `ddp-sim audit TRACE` (exit 0, or 1 with only allowed_findings),
    --repeats runs."""
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        with open(os.path.join(tmp, "audit-out.txt"), "w+") as out:
            p = subprocess.Popen([args.ddp_sim, "audit", trace], env=base_env(), stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = p.wait(timeout=args.run_deadline)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                raise RuntimeError(f"ddp-sim audit {trace}: still running after "
                                   f"{args.run_deadline:.0f} s")
            times.append(time.perf_counter() - t0)
            out.seek(0)
            text = out.read()
            if rc != 0 and not (rc == 1 and only_allowed(text, allowed_findings)):
                raise RuntimeError(f"ddp-sim audit exited {rc}: {text[-500:]}")
    return statistics.median(times)


def dir_bytes(trace):
    return sum(os.path.getsize(os.path.join(trace, f)) for f in os.listdir(trace)
               if f.endswith(".jsonl"))


def ab(rep):
    """Order of the pair in repeat `rep`: bare first on even repeats, audited first on odd ones."""
    return (False, True) if rep % 2 == 0 else (True, False)


def med(vals):
    return statistics.median(vals)


def main_overhead(args, tmp):
    import shutil
    m = {}  # (side, world, audited) -> [run dicts]
    largest = None  # (bytes, label, kept trace dir)
    for rep in range(args.repeats):
        for w in args.worlds:
            for side, fn in (("python", python_run), ("ddp-train", cpp_run)):
                if side not in args.sides:
                    continue
                for audited in ab(rep):
                    r = fn(args, w, audited, tmp)
                    m.setdefault((side, w, audited), []).append(r)
                    if audited:
                        size = dir_bytes(r["trace"])
                        if largest is None or size > largest[0]:
                            keep = os.path.join(tmp, "largest-trace")
                            shutil.rmtree(keep, ignore_errors=True)
                            shutil.copytree(r["trace"], keep)
                            largest = (size, f"{side} W={w}", keep,
                                       ("coverage",) if side == "python" else ())
                        shutil.rmtree(r["trace"])
                bare = m[(side, w, False)][-1]["seconds"]
                aud = m[(side, w, True)][-1]["seconds"]
                print(f"  repeat {rep + 1}/{args.repeats} {side} W={w}: bare {bare:.3f} s, "
                      f"audited {aud:.3f} s, ratio {aud / bare:.3f}", file=sys.stderr, flush=True)
    audit_s = audit_seconds(args, largest[2], tmp, largest[3]) if largest else None

    print(f"audit recorder overhead: ddp-sim launch -n W bare vs --audit --trace-dir, interleaved "
          f"(order alternating), median of {args.repeats}; torch {torch_version(args.python)}, "
          f"{os.cpu_count()} CPUs, 1 torch thread per rank, gloo on 127.0.0.1")
    print("goal: audited/bare of the training loop <= 1.05 (1.10 at the very least)")
    rows = []
    cpu_line = []
    for side in args.sides:
        if side == "python":
            print(f"\nPython DDP loop (MNIST MLP 784-128-10, DataLoader + DistributedSampler, batch "
                  f"64/rank): {args.warmup} warm-up + {args.steps} timed steps; loop s = timed "
                  "steps between barriers")
        else:
            print("\nddp-train --dataset mnist --epochs 1 --no-eval --threads 1: loop s = report's "
                  "train_seconds")
        print(f"{'':5}{'loop bare s':>12}{'audited s':>11}{'ratio':>7}{'(min-max)':>15}"
              f"{'wall bare s':>13}{'audited s':>11}{'ratio':>7}{'steps':>7}{'B/rank/step':>13}"
              f"{'goal':>6}")
        for w in args.worlds:
            b, a = m[(side, w, False)], m[(side, w, True)]
            ratios = [x["seconds"] / y["seconds"] for x, y in zip(a, b)]
            lb, la = med([x["seconds"] for x in b]), med([x["seconds"] for x in a])
            wb, wa = med([x["wall"] for x in b]), med([x["wall"] for x in a])
            steps = a[-1]["steps"]
            bps = med([x["bytes"] / x["steps"] / w for x in a])
            ratio = la / lb
            goal = "yes" if ratio <= 1.05 else ("~" if ratio <= 1.10 else "NO")
            print(f"W={w:<3}{lb:12.3f}{la:11.3f}{ratio:7.3f}  ({min(ratios):.3f}-"
                  f"{max(ratios):.3f}){wb:13.2f}{wa:11.2f}{wa / wb:7.3f}{steps:7d}{bps:13.0f}"
                  f"{goal:>6}")
            if side == "python":
                cb, ca = med([x["cpu"] for x in b]), med([x["cpu"] for x in a])
                cpu_line.append(f"W={w}: {cb:.3f} s bare, {ca:.3f} s audited, ratio {ca / cb:.3f}")
            rows.append({"side": side, "world_size": w, "steps": steps,
                         "loop_bare_s": [x["seconds"] for x in b],
                         "loop_audited_s": [x["seconds"] for x in a],
                         "loop_cpu_bare_s": [x.get("cpu") for x in b],
                         "loop_cpu_audited_s": [x.get("cpu") for x in a],
                         "ratio_of_medians": ratio, "pair_ratios": ratios,
                         "wall_bare_s": [x["wall"] for x in b],
                         "wall_audited_s": [x["wall"] for x in a],
                         "trace_bytes": [x["bytes"] for x in a],
                         "trace_bytes_per_rank_per_step": bps})
    if cpu_line:
        print("Python loop, rank 0's CPU time in the timed steps (process_time, all its threads; "
              "less sensitive to a shared machine than wall): " + "; ".join(cpu_line))
    print("goal column: yes <= 1.05, ~ <= 1.10, NO above; wall audited includes the launcher's "
          "own audit of the trace")
    if largest:
        print(f"\nddp-sim audit on the largest trace ({largest[1]}, {largest[0]} bytes): "
              f"{audit_s:.3f} s (median of {args.repeats}; not part of any loop time)")
    return {"rows": rows, "audit": {"trace": largest[1] if largest else None,
                                    "bytes": largest[0] if largest else None,
                                    "seconds": audit_s}}


# The three loops of --emulation: (name, launch flags, written for GPUs).
EMULATION_RUNS = (("CPU loop, bare", (), False), ("CPU loop, --cpu", ("--cpu",), False),
                  ("GPU-style loop, --cpu", ("--cpu",), True))


def main_emulation(args, tmp):
    m = {}  # (world, run index) -> [run dicts]
    for rep in range(args.repeats):
        for w in args.worlds:
            n = len(EMULATION_RUNS)
            for k in range(n):
                i = (k + rep) % n  # rotate the order between repeats
                _, flags, gpu = EMULATION_RUNS[i]
                m.setdefault((w, i), []).append(python_run(args, w, False, tmp, flags, gpu))
            print(f"  repeat {rep + 1}/{args.repeats} W={w}: " + ", ".join(
                f"{EMULATION_RUNS[i][0]} {m[(w, i)][-1]['seconds']:.3f} s" for i in range(n)),
                file=sys.stderr, flush=True)
    print(f"CPU emulation of CUDA (--cpu), not audited, the three loops back to back (order "
          f"rotating), median of {args.repeats}; torch {torch_version(args.python)}, "
          f"{os.cpu_count()} CPUs, 1 torch thread per rank; Python DDP loop on MNIST, "
          f"{args.warmup} warm-up + {args.steps} timed steps")
    print("goals: CPU loop under --cpu / bare <= 1.03; GPU-style loop under --cpu / the CPU loop "
          "bare (its hand port) <= 1.05")
    print(f"{'':5}" + "".join(f"{name + ' s':>24}" for name, _, _ in EMULATION_RUNS) +
          f"{'--cpu/bare':>12}{'GPU-style/bare':>16}")
    rows = []
    for w in args.worlds:
        loops = [med([x["seconds"] for x in m[(w, i)]]) for i in range(len(EMULATION_RUNS))]
        cpu_ratio, gpu_ratio = loops[1] / loops[0], loops[2] / loops[0]
        print(f"W={w:<3}" + "".join(f"{v:24.3f}" for v in loops) +
              f"{cpu_ratio:12.3f}{gpu_ratio:16.3f}")
        rows.append({"world_size": w, "loop_s": {EMULATION_RUNS[i][0]: [x["seconds"] for x in m[(w, i)]]
                                                 for i in range(len(EMULATION_RUNS))},
                     "cpu_over_bare": cpu_ratio, "gpu_style_over_bare": gpu_ratio})
    return {"emulation": rows}


def main_big(args, tmp):
    import shutil
    m = {}
    for rep in range(args.repeats):
        for audited in ab(rep):
            r = big_run(args, audited, tmp)
            if audited:
                keep = os.path.join(tmp, "big-trace")
                shutil.rmtree(keep, ignore_errors=True)
                os.rename(r["trace"], keep)
            m.setdefault(audited, []).append(r)
        print(f"  repeat {rep + 1}/{args.repeats}: iter bare {m[False][-1]['iter_s'] * 1e3:.2f} "
              f"ms, audited {m[True][-1]['iter_s'] * 1e3:.2f} ms", file=sys.stderr, flush=True)
    print(f"compactness: DistributedSampler over {args.big_n} items, DataLoader batch 1024, "
          f"{args.big_batches} batches then break, W=2, median of {args.repeats}")
    print(f"{'':9}{'iter(loader) ms':>16}{'1st batch ms':>14}{'all batches s':>15}{'wall s':>9}"
          f"{'trace bytes (2 ranks)':>23}")
    out = {}
    for audited in (False, True):
        rs = m[audited]
        name = "audited" if audited else "bare"
        tb = f"{med([x['bytes'] for x in rs]):.0f}" if audited else "-"
        print(f"{name:9}{med([x['iter_s'] for x in rs]) * 1e3:16.2f}"
              f"{med([x['first_batch_s'] for x in rs]) * 1e3:14.1f}"
              f"{med([x['batches_s'] for x in rs]):15.3f}{med([x['wall'] for x in rs]):9.2f}"
              f"{tb:>23}")
        out[name] = [{k: v for k, v in x.items() if k != "trace"} for x in rs]
    ratio = {k: med([x[k] for x in m[True]]) / med([x[k] for x in m[False]])
             for k in ("iter_s", "first_batch_s", "batches_s")}
    print("ratio    " + "".join(f"{ratio[k]:>16.3f}" if i == 0 else
                                 (f"{ratio[k]:14.3f}" if i == 1 else f"{ratio[k]:15.3f}")
                                 for i, k in enumerate(("iter_s", "first_batch_s", "batches_s"))))
    audit_s = audit_seconds(args, os.path.join(tmp, "big-trace"), tmp, ("coverage",))
    print(f"ddp-sim audit of that trace: {audit_s:.3f} s (median of {args.repeats}; it "
          f"recomputes every rank's order of the {args.big_n} items: not part of any time above, "
          "in the audited wall time)")
    return {"big": out, "ratios": ratio, "audit_s": audit_s}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddp-sim", default=os.path.join(REPO, "build", "bin", "ddp-sim"))
    parser.add_argument("--ddp-train", default=os.path.join(REPO, "build", "bin", "ddp-train"))
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="interpreter of the Python ranks (default /usr/bin/python3)")
    parser.add_argument("--mnist-dir", default=os.path.join(REPO, "data", "mnist"))
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--sides", nargs="+", default=["python", "ddp-train"],
                        choices=["python", "ddp-train"])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved pairs; median printed")
    parser.add_argument("--steps", type=int, default=400,
                        help="timed steps of the Python loop (default 400)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    parser.add_argument("--big", action="store_true",
                        help="run the 10^7-sample compactness check instead")
    parser.add_argument("--emulation", action="store_true",
                        help="measure the CPU emulation of CUDA (--cpu) instead")
    parser.add_argument("--gpu-style", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--big-n", type=int, default=10 ** 7, help=argparse.SUPPRESS)
    parser.add_argument("--big-batches", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="deadline of process-group init and every collective, s")
    parser.add_argument("--run-deadline", type=float, default=600.0,
                        help="deadline of one launch (all its rank processes), s")
    parser.add_argument("--json", help="also write every measurement here")
    parser.add_argument("--rank-worker", choices=["mnist", "big"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.mnist_dir = os.path.abspath(args.mnist_dir)
    if args.rank_worker == "mnist":
        return rank_mnist(args)
    if args.rank_worker == "big":
        return rank_big(args)

    if args.steps <= 0 or args.warmup < 0 or args.repeats <= 0 or min(args.worlds) <= 0:
        print("audit_overhead.py: error: --steps, --repeats, --worlds must be positive",
              file=sys.stderr)
        return 2
    needed = [("ddp-sim", args.ddp_sim)]
    if not args.big and not args.emulation and "ddp-train" in args.sides:
        needed.append(("ddp-train", args.ddp_train))
    for name, path in needed:
        if not os.access(path, os.X_OK):
            print(f"audit_overhead.py: error: {name} is not an executable: {path} "
                  "(cmake --build build --target ddp-sim ddp-train)", file=sys.stderr)
            return 2
    args.ddp_sim, args.ddp_train = os.path.abspath(args.ddp_sim), os.path.abspath(args.ddp_train)
    if not args.big and not os.path.isfile(os.path.join(args.mnist_dir, "train-images-idx3-ubyte")):
        print(f"audit_overhead.py: error: no MNIST in {args.mnist_dir} "
              "(run scripts/fetch-mnist.sh)", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="ddph-audit-bench-") as tmp:
            main_of = main_big if args.big else main_emulation if args.emulation else main_overhead
            result = main_of(args, tmp)
    except (RuntimeError, OSError) as e:
        print(f"audit_overhead.py: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), **result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
