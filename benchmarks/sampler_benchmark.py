#!/usr/bin/env python3
"""Sampler benchmark: ddph's DistributedSampler against PyTorch's, measured in the same run.

Speed: every rank's indices for one epoch (default N = 10^7, W = 8).
  * Python: for each of the W ranks, a real torch.utils.data.DistributedSampler, set_epoch, list().
  * C++ (bench-sampler): DistributedSampler::partition() (one shared permutation, what ddp-sim does)
    and indices() once per rank (W permutations, as PyTorch's ranks do); randperm alone with
    RandpermImpl::kLibTorch and kReplica.
Every measurement is repeated and the median reported; checksums of every rank's indices must
agree between C++ and Python (the benchmark refuses to print ratios for different results).

Memory: peak RSS (ru_maxrss from wait4, a fresh process each) of computing ONE rank's indices at
N = 10^8, compared with the size of one int64 permutation of N (8 N bytes), for bench-sampler
(--randperm auto and libtorch), `ddp-sim sampler --rank 0`, an empty run (the libraries alone) and,
unless --no-python-rss, Python's DistributedSampler.

Exit codes: 0 done, 1 C++ and Python disagree, 2 bad arguments or a failure to run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from peak_rss import peak_rss  # noqa: E402 (same folder)

KB = 1024
MIB = 1024 * 1024
CHILD_TIMEOUT_S = 600


def run_json(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=CHILD_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace').strip()}")
    return json.loads(proc.stdout)


def checksum(np, indices):
    """The order-sensitive checksum bench-sampler computes (uint64 wrap-around)."""
    a = np.asarray(indices, dtype=np.int64).astype(np.uint64) + np.uint64(1)
    k = np.arange(len(a), dtype=np.uint64) * np.uint64(2654435761) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(a * k, dtype=np.uint64))


PYTHON_ONE_RANK = """
import sys
from torch.utils.data import DistributedSampler
class D:
    def __len__(self): return int(sys.argv[1])
s = DistributedSampler(D(), num_replicas=int(sys.argv[2]), rank=0, seed=0)
s.set_epoch(0)
print(len(list(s)))
"""


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default=os.path.join(here, "..", "build", "bin", "bench-sampler"))
    parser.add_argument("--ddp-sim", default=os.path.join(here, "..", "build", "bin", "ddp-sim"))
    parser.add_argument("--dataset-size", type=int, default=10**7)
    parser.add_argument("--world-size", type=int, default=8)
    parser.add_argument("--epoch", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5, help="C++ runs per measurement")
    parser.add_argument("--python-repeats", type=int, default=3, help="Python runs")
    parser.add_argument("--rss-size", type=int, default=10**8, help="N of the peak-RSS probes")
    parser.add_argument("--no-python-rss", action="store_true",
                        help="skip Python's peak-RSS probe (slow, several GB)")
    args = parser.parse_args()

    try:
        import numpy as np
        import torch
        from torch.utils.data import DistributedSampler
    except ImportError as e:
        print(f"sampler_benchmark: error: {sys.executable} cannot import torch/numpy ({e})",
              file=sys.stderr)
        return 2
    n, w = args.dataset_size, args.world_size

    print(f"Sampler benchmark: N={n} W={w} epoch={args.epoch} seed={args.seed}; torch "
          f"{torch.__version__}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        cpp = run_json([args.bench, "--dataset-size", str(n), "--world-size", str(w), "--epoch",
                        str(args.epoch), "--seed", str(args.seed), "--repeats", str(args.repeats)])
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"sampler_benchmark: error: {e}", file=sys.stderr)
        return 2

    class LengthDataset:
        def __len__(self):
            return n

    times, last = [], None
    for _ in range(args.python_repeats):
        start = time.perf_counter()
        ranks = []
        for rank in range(w):
            sampler = DistributedSampler(LengthDataset(), num_replicas=w, rank=rank, seed=args.seed)
            sampler.set_epoch(args.epoch)
            ranks.append(list(sampler))
        times.append(time.perf_counter() - start)
        last, ranks = ranks, None
    python_s = statistics.median(times)
    python_sums = [checksum(np, r) for r in last]
    last = None

    g = torch.Generator()
    randperm_times = []
    for _ in range(args.python_repeats):
        g.manual_seed(args.seed + args.epoch)
        start = time.perf_counter()
        torch.randperm(n, generator=g)
        randperm_times.append(time.perf_counter() - start)
    torch_randperm_s = statistics.median(randperm_times)

    for key in ("partition", "per_rank"):
        if cpp[key]["checksums"] != python_sums:
            print(f"sampler_benchmark: error: C++ {key} indices differ from Python's "
                  f"(checksums {cpp[key]['checksums']} vs {python_sums})", file=sys.stderr)
            return 1
    if cpp["randperm_libtorch"]["checksums"] != cpp["randperm_replica"]["checksums"]:
        print("sampler_benchmark: error: kReplica's permutation differs from kLibTorch's",
              file=sys.stderr)
        return 1

    def fmt_times(samples):
        return ", ".join(f"{s:.3f}" for s in samples)

    print(f"\nEvery rank's indices for one epoch (median of {args.repeats} C++ / "
          f"{args.python_repeats} Python runs; checksums of all {w} ranks equal):")
    print(f"  {'':44} {'median':>9} {'vs Python':>10}   runs (s)")
    print(f"  {'Python DistributedSampler, list() x ' + str(w) + ' ranks':44} {python_s:8.3f}s "
          f"{'1.0x':>10}   {fmt_times(times)}")
    for key, label in (("partition", "C++ partition() (1 shared permutation)"),
                       ("per_rank", f"C++ indices() x {w} ranks ({w} permutations)")):
        m = cpp[key]["median_s"]
        print(f"  {label:44} {m:8.3f}s {python_s / m:9.1f}x   {fmt_times(cpp[key]['seconds'])}")
    print(f"\nThe permutation alone, randperm({n}):")
    print(f"  {'':44} {'median':>9} {'vs LibTorch':>11}")
    lib = cpp["randperm_libtorch"]["median_s"]
    print(f"  {'Python torch.randperm':44} {torch_randperm_s:8.3f}s {lib / torch_randperm_s:10.2f}x")
    print(f"  {'C++ RandpermImpl::kLibTorch (torch::randperm)':44} {lib:8.3f}s {1.0:10.2f}x")
    rep = cpp["randperm_replica"]["median_s"]
    print(f"  {'C++ RandpermImpl::kReplica':44} {rep:8.3f}s {lib / rep:10.2f}x   (same permutation)")

    # --- Peak memory of one rank's indices ---------------------------------------------------------
    big = args.rss_size
    perm_bytes = 8 * big
    shard_bytes = 8 * -(-big // w)
    print(f"\nPeak RSS of one rank's indices at N={big}, W={w} (fresh process each; one int64 "
          f"permutation of N = {perm_bytes / MIB:.0f} MiB, one rank's shard = "
          f"{shard_bytes / MIB:.0f} MiB):")
    # (label, command, baseline label): the increase over the baseline is what the indices cost.
    cpp_base, py_base = "bench-sampler, N=0 (libraries only)", "Python, N=0 (interpreter + torch only)"
    probes = [
        ("/bin/true (the probe's own footprint)", ["/bin/true"], None),
        (cpp_base, [args.bench, "--one-rank", "--dataset-size", "0", "--world-size", str(w)], None),
        ("bench-sampler --one-rank (randperm auto)",
         [args.bench, "--one-rank", "--dataset-size", str(big), "--world-size", str(w)], cpp_base),
        ("bench-sampler --one-rank --randperm libtorch",
         [args.bench, "--one-rank", "--dataset-size", str(big), "--world-size", str(w),
          "--randperm", "libtorch"], cpp_base),
        ("ddp-sim sampler --rank 0",
         [args.ddp_sim, "sampler", "--dataset-size", str(big), "--world-size", str(w), "--rank", "0"],
         cpp_base),
        (py_base, [sys.executable, "-c", PYTHON_ONE_RANK, "0", str(w)], None),
    ]
    if not args.no_python_rss:
        probes.append(("Python DistributedSampler, list() of rank 0",
                       [sys.executable, "-c", PYTHON_ONE_RANK, str(big), str(w)], py_base))
    print(f"  {'':46} {'peak RSS':>10} {'increase':>10} {'increase/perm':>14} {'wall':>8}")
    peaks = {}
    for label, cmd, base in probes:
        try:
            rss, wall = peak_rss(cmd, CHILD_TIMEOUT_S)
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
            print(f"sampler_benchmark: error: {e}", file=sys.stderr)
            return 2
        peaks[label] = rss
        if base is None:
            print(f"  {label:46} {rss / MIB:6.0f} MiB {'':>10} {'':>14} {wall:7.1f}s", flush=True)
        else:
            extra = rss - peaks[base]
            print(f"  {label:46} {rss / MIB:6.0f} MiB {extra / MIB:6.0f} MiB {extra / perm_bytes:13.2f}x "
                  f"{wall:7.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
