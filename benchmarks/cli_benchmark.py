#!/usr/bin/env python3
"""ddp-sim's command-line costs against Python's torch, measured in the same run.

Start-up: `ddp-sim sampler -N 10 -W 2` (torch-free: LibTorch is not loaded, NOTE [LibTorch on
demand]), the same with `--sampler libtorch-random` (LibTorch loaded on demand), and the Python
peer: a fresh interpreter that imports torch and prints both ranks of a DistributedSampler.

JSON: `ddp-sim sampler -N 10^7 -W 8 --json` into a file, against Python writing the same object
with json.dump from its 8 DistributedSamplers; the two files must hold the same indices.

Every command is run from argv (no shell) in a fresh process; medians are reported. Exit codes:
0 done, 1 the two JSON files disagree, 2 bad arguments or a failure to run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PY_STARTUP = """
import torch
from torch.utils.data.distributed import DistributedSampler
for r in range(2):
    s = DistributedSampler(range(10), num_replicas=2, rank=r)
    s.set_epoch(0)
    print(r, list(s))
"""

PY_JSON = """
import json, sys
from torch.utils.data.distributed import DistributedSampler
n, w, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
class Sized:
    def __len__(self): return n
ranks = []
for r in range(w):
    s = DistributedSampler(Sized(), num_replicas=w, rank=r, shuffle=True, seed=0)
    s.set_epoch(0)
    ranks.append({"rank": r, "indices": list(s)})
with open(path, "w") as f:
    json.dump({"ranks": ranks}, f, separators=(",", ":"))
"""


def timed(argv, stdout=subprocess.DEVNULL, timeout=600):
    start = time.perf_counter()
    subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, check=True, timeout=timeout)
    return time.perf_counter() - start


def median_of(repeats, argv):
    runs = [timed(argv) for _ in range(repeats)]
    return statistics.median(runs), runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ddp-sim", required=True, help="path of the ddp-sim executable")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each short command")
    ap.add_argument("-N", type=int, default=10_000_000, help="dataset size of the JSON run")
    ap.add_argument("-W", type=int, default=8, help="world size of the JSON run")
    args = ap.parse_args()
    if args.repeats < 1 or args.N < 1 or args.W < 1:
        print("cli_benchmark: --repeats, -N and -W must be positive", file=sys.stderr)
        return 2
    sim = args.ddp_sim
    try:
        small = [sim, "sampler", "-N", "10", "-W", "2"]
        sim_s, sim_runs = median_of(args.repeats, small)
        lib_s, lib_runs = median_of(args.repeats, small + ["--sampler", "libtorch-random"])
        py_s, py_runs = median_of(args.repeats, [sys.executable, "-c", PY_STARTUP])

        print(f"Start-up, `ddp-sim sampler -N 10 -W 2` (median of {args.repeats}):")
        print(f"  {'ddp-sim (LibTorch not loaded)':42} {sim_s:8.3f} s   {py_s / sim_s:7.1f}x faster than Python")
        print(f"  {'ddp-sim --sampler libtorch-random':42} {lib_s:8.3f} s   (LibTorch loaded on demand)")
        print(f"  {'Python: import torch, DistributedSampler':42} {py_s:8.3f} s")

        with tempfile.TemporaryDirectory(prefix="ddph-cli-bench-") as tmp:
            sim_json = os.path.join(tmp, "sim.json")
            py_json = os.path.join(tmp, "py.json")
            json_runs = []
            for _ in range(args.repeats):
                with open(sim_json, "wb") as out:
                    json_runs.append(timed([sim, "sampler", "-N", str(args.N), "-W", str(args.W),
                                            "--json"], stdout=out))
            json_s = statistics.median(json_runs)
            size = os.path.getsize(sim_json)
            py_json_s = timed([sys.executable, "-c", PY_JSON, str(args.N), str(args.W), py_json],
                              timeout=1800)
            with open(sim_json) as f:
                sim_ranks = [r["indices"] for r in json.load(f)["ranks"]]
            with open(py_json) as f:
                py_ranks = [r["indices"] for r in json.load(f)["ranks"]]
            if sim_ranks != py_ranks:
                print("cli_benchmark: ddp-sim and Python wrote different indices", file=sys.stderr)
                return 1
        mb = size / 1e6
        print(f"\nJSON of every rank's indices, N = {args.N}, W = {args.W} ({mb:.1f} MB, same "
              f"indices as Python's):")
        print(f"  {f'ddp-sim sampler --json (median of {args.repeats})':42} {json_s:8.3f} s   {mb / json_s:6.0f} MB/s "
              f"  {py_json_s / json_s:5.1f}x faster than Python")
        print(f"  {'Python: 8 DistributedSamplers, json.dump':42} {py_json_s:8.3f} s   "
              f"{mb / py_json_s:6.0f} MB/s")
        print("\nruns (s): ddp-sim " + " ".join(f"{t:.3f}" for t in sim_runs) +
              " | libtorch " + " ".join(f"{t:.3f}" for t in lib_runs) +
              " | python " + " ".join(f"{t:.3f}" for t in py_runs) +
              " | json " + " ".join(f"{t:.3f}" for t in json_runs))
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        print(f"cli_benchmark: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
