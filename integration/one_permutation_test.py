#!/usr/bin/env python3
"""One rank's indices must hold at most one permutation of N in memory.

Runs `bench-sampler --one-rank` (DistributedSampler::indices for rank 0) in a fresh process for each
randperm implementation and compares its peak RSS with an empty run of the same implementation
(N = 0: the libraries alone, LibTorch included where the implementation loads it on demand).
The increase must stay below 1.5 permutations of N (8 N bytes each; the shard adds 8 N / W). Before
the fix in core/sampler/src/randperm.cpp, RandpermImpl::kLibTorch copied torch::randperm's tensor
into a vector and peaked at two permutations, which this test reports.

Exit codes: 0 within bounds, 1 over, 2 failure to run.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from peak_rss import peak_rss  # noqa: E402

MIB = 1024 * 1024
TIMEOUT_S = 600


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", required=True, help="path to bench-sampler")
    parser.add_argument("--dataset-size", type=int, default=30_000_000)
    parser.add_argument("--world-size", type=int, default=8)
    parser.add_argument("--max-permutations", type=float, default=1.5)
    args = parser.parse_args()
    n, w = args.dataset_size, args.world_size
    permutation = 8 * n
    try:
        print(f"one permutation of N={n}: {permutation / MIB:.0f} MiB")
        failed = False
        for impl in ("libtorch", "replica", "auto"):
            base, _ = peak_rss([args.bench, "--one-rank", "--dataset-size", "0", "--randperm", impl],
                               TIMEOUT_S)
            rss, wall = peak_rss([args.bench, "--one-rank", "--dataset-size", str(n), "--world-size",
                                  str(w), "--randperm", impl], TIMEOUT_S)
            ratio = (rss - base) / permutation
            ok = ratio <= args.max_permutations
            failed |= not ok
            print(f"  --randperm {impl:8}: baseline (N=0) {base / MIB:4.0f} MiB, peak {rss / MIB:6.0f} MiB, increase {(rss - base) / MIB:6.0f} "
                  f"MiB = {ratio:.2f} permutations ({wall:.1f} s) {'ok' if ok else 'FAIL'}")
    except (RuntimeError, OSError, ValueError) as e:
        print(f"one_permutation_test: error: {e}", file=sys.stderr)
        return 2
    if failed:
        print(f"one_permutation_test: FAILED: peak above {args.max_permutations} permutations of N",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
