#!/usr/bin/env python3
"""Oracle test: ddp-sim's DistributedSampler against PyTorch's own, bit for bit.

For every configuration of a seeded, reproducible mix (dataset size N from 0 to 10^5, N below the
number of replicas W included, W up to 1000, seeds large, small and negative, several epochs,
drop_last and shuffle both ways) this script

  * runs the real CLI once: `ddp-sim sampler --dataset-size N --world-size W --epoch E --seed S
    [--drop-last] [--no-shuffle] --json`, which prints every rank's indices;
  * builds, for every rank, a real `torch.utils.data.DistributedSampler` over a dataset of length N,
    calls `set_epoch(E)` and takes `list()` of it;

and requires the two lists to be equal on every rank. On a mismatch it prints the configuration,
the rank, the first differing position and both values, and exits 1.

Exit codes: 0 every configuration matched, 1 a mismatch, 2 bad arguments or a failure to run
(ddp-sim failed, timed out or printed something that is not the expected JSON, torch missing).

`--expect-mismatch` inverts the verdict for the self-test: the run then passes only when a mismatch
is reported (anything else, including a failure to run, fails). It is used with a deliberately
wrong C++ side (`--cpp-sampler libtorch-random`, `--cpp-epoch-offset 1`) to show the oracle can fail.

The ddp-sim calls are independent processes (each pays LibTorch's start-up), so a small pool runs
them ahead of the Python side, which is the slow part for large W.
"""

import argparse
import concurrent.futures
import json
import os
import random
import resource
import subprocess
import sys
import time
import traceback

EXIT_OK, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
DEFAULT_SEED = 20261129
DDP_SIM_TIMEOUT_S = 300


class RunFailure(Exception):
    """The oracle could not run a configuration (not a mismatch)."""


class Config:
    __slots__ = ("n", "w", "epoch", "seed", "drop_last", "shuffle")

    def __init__(self, n, w, epoch, seed, drop_last, shuffle):
        self.n, self.w, self.epoch, self.seed = n, w, epoch, seed
        self.drop_last, self.shuffle = drop_last, shuffle

    def __str__(self):
        return (f"N={self.n} W={self.w} epoch={self.epoch} seed={self.seed} "
                f"drop_last={self.drop_last} shuffle={self.shuffle}")

    def cost(self):
        # Python's side rebuilds the whole order on every rank: about W * N work.
        return self.w * max(self.n, 1)


# --- The configuration mix -------------------------------------------------------------------------

# Seeds that exercise the generator's edges: Python's manual_seed takes any int in [-2^63, 2^64) and
# wraps negatives to uint64; the mt19937 uses the low 32 bits.
EDGE_SEEDS = [0, 1, 42, -1, -2, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, -(2**32),
              INT64_MAX, INT64_MIN, INT64_MAX - 5, INT64_MIN + 3]


def pick_seed(rng):
    kind = rng.random()
    if kind < 0.4:
        return rng.choice(EDGE_SEEDS)
    if kind < 0.6:
        return rng.randint(-1000, 1000)
    return rng.randint(INT64_MIN, INT64_MAX)


def pick_epoch(rng, seed):
    kind = rng.random()
    if kind < 0.5:
        epoch = rng.randint(0, 3)
    elif kind < 0.85:
        epoch = rng.randint(0, 1000)
    else:
        epoch = rng.choice([2**31 - 1, 2**32, 2**32 + 7, rng.randint(0, 2**62)])
    # Python rejects seed + epoch >= 2^64 (manual_seed overflows); the C++ side wraps. Stay in range.
    if seed + epoch > 2**64 - 1:
        epoch = 0
    return epoch


def make_configs(seed):
    """The configuration mix: a fixed list of edge cases plus seeded random ones."""
    rng = random.Random(seed)
    configs = []

    def add(n, w, epoch=None, cfg_seed=None, drop_last=None, shuffle=None):
        s = pick_seed(rng) if cfg_seed is None else cfg_seed
        configs.append(Config(
            n, w,
            pick_epoch(rng, s) if epoch is None else epoch,
            s,
            rng.random() < 0.5 if drop_last is None else drop_last,
            rng.random() < 0.75 if shuffle is None else shuffle))

    # Fixed edge cases: empty and single-sample datasets, N around W, every flag combination.
    for drop_last in (False, True):
        for shuffle in (True, False):
            add(0, 7, 3, -1, drop_last, shuffle)
            add(1, 1, 0, 0, drop_last, shuffle)
            add(1, 1000, 1, INT64_MAX, drop_last, shuffle)
            add(999, 1000, 2, INT64_MIN, drop_last, shuffle)
            add(1001, 1000, 0, -(2**32), drop_last, shuffle)
            add(3, 8, INT64_MAX, -1, drop_last, shuffle)  # seed + epoch = 2^63 - 2
    # Small N, any W up to 1000 (N < W often: padding tiles the order several times).
    for _ in range(28):
        add(rng.randint(0, 64), rng.randint(1, 1000))
    add(10**5, 2, 1, 0, False, True)
    add(10**5, 1, 0, 0, False, False)
    # Medium N, medium W.
    for _ in range(18):
        add(rng.randint(65, 5000), rng.randint(1, 300))
    # Large N, small W.
    for _ in range(14):
        add(rng.randint(5000, 10**5), rng.randint(1, 16))
    # N around a multiple of W (drop_last's cut and the padding are both at most W - 1).
    for _ in range(10):
        w = rng.randint(2, 1000)
        add(max(0, w * rng.randint(1, 20) + rng.randint(-2, 2)), w)
    # A few big ones: Python rebuilds a 10^5 permutation on each of W ranks.
    add(10**5, 1000, 0, 0, False, True)
    add(10**5 - 1, 997, rng.randint(0, 100), pick_seed(rng), True, True)
    add(rng.randint(50000, 10**5), rng.randint(200, 500))
    return configs


# --- The two sides ---------------------------------------------------------------------------------

def run_ddp_sim(ddp_sim, cfg, sampler, epoch_offset):
    """Every rank's indices from the real CLI, after checking the JSON header."""
    epoch = cfg.epoch + epoch_offset
    cmd = [ddp_sim, "sampler", "--dataset-size", str(cfg.n), "--world-size", str(cfg.w),
           "--epoch", str(epoch), "--seed", str(cfg.seed), "--json"]
    if cfg.drop_last:
        cmd.append("--drop-last")
    if not cfg.shuffle:
        cmd.append("--no-shuffle")
    if sampler is not None:
        cmd += ["--sampler", sampler]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=DDP_SIM_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise RunFailure(f"{' '.join(cmd)}: no answer within {DDP_SIM_TIMEOUT_S} s")
    if proc.returncode != 0:
        raise RunFailure(f"{' '.join(cmd)}: exit {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace').strip()}")
    try:
        out = json.loads(proc.stdout)
    except ValueError as e:
        raise RunFailure(f"{' '.join(cmd)}: output is not JSON: {e}")
    expected = {"dataset_size": cfg.n, "world_size": cfg.w, "epoch": epoch, "seed": cfg.seed,
                "drop_last": cfg.drop_last, "shuffle": cfg.shuffle}
    for key, value in expected.items():
        if out.get(key) != value:
            raise RunFailure(f"{' '.join(cmd)}: JSON field {key!r} is {out.get(key)!r}, "
                             f"expected {value!r}")
    ranks = out.get("ranks")
    if not isinstance(ranks, list) or [r.get("rank") for r in ranks] != list(range(cfg.w)):
        raise RunFailure(f"{' '.join(cmd)}: JSON 'ranks' does not list ranks 0..{cfg.w - 1} in order")
    return [r["indices"] for r in ranks]


class LengthDataset:
    """All DistributedSampler reads of a dataset is its length."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def python_indices(torch_sampler_cls, cfg, rank):
    sampler = torch_sampler_cls(LengthDataset(cfg.n), num_replicas=cfg.w, rank=rank,
                                shuffle=cfg.shuffle, seed=cfg.seed, drop_last=cfg.drop_last)
    sampler.set_epoch(cfg.epoch)
    indices = list(sampler)
    if len(indices) != len(sampler):
        raise RunFailure(f"{cfg} rank {rank}: PyTorch's own len() {len(sampler)} differs from the "
                         f"{len(indices)} indices it yields")
    return indices


def first_difference(expected, actual):
    for pos, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            return pos, e, a
    pos = min(len(expected), len(actual))
    return (pos,
            expected[pos] if pos < len(expected) else "<end>",
            actual[pos] if pos < len(actual) else "<end>")


# --- Driver ----------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ddp-sim", required=True, help="path to the ddp-sim executable")
    parser.add_argument("--seed", type=int,
                        default=int(os.environ.get("DDPH_ORACLE_SEED", DEFAULT_SEED)),
                        help="seed of the configuration mix (default: $DDPH_ORACLE_SEED or "
                             f"{DEFAULT_SEED})")
    parser.add_argument("--limit", type=int, default=None,
                        help="check only the first LIMIT configurations")
    parser.add_argument("--jobs", type=int, default=2, help="ddp-sim processes run ahead")
    parser.add_argument("--max-reports", type=int, default=10,
                        help="mismatches printed in full before the rest are only counted")
    parser.add_argument("--cpp-sampler", default=None,
                        help="self-test: pass --sampler NAME to ddp-sim (a deliberately wrong "
                             "C++ side, e.g. libtorch-random)")
    parser.add_argument("--cpp-epoch-offset", type=int, default=0,
                        help="self-test: ask ddp-sim for epoch E + K instead of E")
    parser.add_argument("--expect-mismatch", action="store_true",
                        help="self-test: pass only if a mismatch is found (stops at the first)")
    args = parser.parse_args()

    try:
        import torch
        from torch.utils.data import DistributedSampler
    except ImportError as e:
        print(f"sampler_oracle: error: {sys.executable} cannot import torch ({e}); the oracle "
              f"needs Python's torch (Debian: python3-torch)", file=sys.stderr)
        return EXIT_ERROR
    if not os.access(args.ddp_sim, os.X_OK):
        print(f"sampler_oracle: error: {args.ddp_sim} is not an executable", file=sys.stderr)
        return EXIT_ERROR
    torch.set_num_threads(1)  # randperm's shuffle is serial anyway; leave the cores to ddp-sim

    configs = make_configs(args.seed)
    if args.limit is not None:
        configs = configs[:args.limit]
    mode = ""
    if args.cpp_sampler or args.cpp_epoch_offset:
        mode = (f" against a deliberately wrong C++ side (sampler={args.cpp_sampler or 'pytorch'}, "
                f"epoch offset={args.cpp_epoch_offset})")
    print(f"sampler_oracle: torch {torch.__version__}, {len(configs)} configurations from seed "
          f"{args.seed} (replay: --seed {args.seed}){mode}", flush=True)

    start = time.monotonic()
    mismatches = 0
    ranks_checked = 0
    indices_checked = 0
    # ddp-sim runs a few configurations ahead of the Python side (a bounded window, so finished
    # answers do not pile up in memory).
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs))
    window = 2 * max(1, args.jobs)
    futures = {}

    def submit_until(index):
        for i in range(len(futures), min(index, len(configs))):
            futures[i] = pool.submit(run_ddp_sim, args.ddp_sim, configs[i], args.cpp_sampler,
                                     args.cpp_epoch_offset)

    try:
        for number, cfg in enumerate(configs, 1):
            submit_until(number + window)
            cpp = futures.pop(number - 1).result()
            config_bad = False
            for rank in range(cfg.w):
                expected = python_indices(DistributedSampler, cfg, rank)
                actual = cpp[rank]
                ranks_checked += 1
                indices_checked += len(expected)
                if expected == actual:
                    continue
                mismatches += 1
                config_bad = True
                if mismatches <= args.max_reports:
                    pos, e, a = first_difference(expected, actual)
                    print(f"MISMATCH config #{number}: {cfg}\n"
                          f"  rank {rank}: first difference at position {pos}: "
                          f"PyTorch {e}, ddp-sim {a} (lengths: PyTorch {len(expected)}, "
                          f"ddp-sim {len(actual)})", flush=True)
                if args.expect_mismatch:
                    break
            if config_bad and args.expect_mismatch:
                break
            if number % 25 == 0:
                print(f"  {number}/{len(configs)} configurations, {time.monotonic() - start:.1f} s",
                      flush=True)
    except RunFailure as e:
        print(f"sampler_oracle: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except Exception:  # a crash is a failure to run, never a verdict (exit 1 means mismatch)
        traceback.print_exc()
        return EXIT_ERROR
    finally:
        for f in futures.values():
            f.cancel()
        pool.shutdown(wait=True)

    elapsed = time.monotonic() - start
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (f"CPU {own.ru_utime + own.ru_stime:.1f} s Python, "
           f"{children.ru_utime + children.ru_stime:.1f} s ddp-sim; load average "
           f"{os.getloadavg()[0]:.1f}")
    if args.expect_mismatch:
        if mismatches:
            print(f"sampler_oracle: self-test passed: the oracle reported the deliberate mismatch "
                  f"({elapsed:.1f} s; {cpu})")
            return EXIT_OK
        print(f"sampler_oracle: self-test FAILED: the deliberately wrong C++ side matched PyTorch on "
              f"all {ranks_checked} ranks of {len(configs)} configurations", file=sys.stderr)
        return EXIT_MISMATCH
    if mismatches:
        print(f"sampler_oracle: FAILED: {mismatches} rank(s) differ from PyTorch "
              f"(seed {args.seed}, {elapsed:.1f} s; {cpu})", file=sys.stderr)
        return EXIT_MISMATCH
    print(f"sampler_oracle: OK: {len(configs)} configurations, {ranks_checked} ranks, "
          f"{indices_checked} indices equal to PyTorch's DistributedSampler ({elapsed:.1f} s wall; {cpu})")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
