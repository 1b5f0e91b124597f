#!/usr/bin/env bash
# One command for the audit recorder's overhead: the same runs under `ddp-sim launch -n W` bare and
# under `ddp-sim launch --audit --trace-dir DIR -n W`, interleaved, ratios audited/bare of one run
# (benchmarks/audit_overhead.py does the work): a Python DDP loop on MNIST (DataLoader +
# DistributedSampler, the Python recorder python/ddph_audit) and ddp-train (the C++ recorder), at
# W = 1, 2, 4; trace bytes per rank per step; `ddp-sim audit` on the largest trace.
# --big instead: the 10^7-sample compactness check (DistributedSampler recorded by reference).
# Arguments go to audit_overhead.py (--repeats, --worlds, --steps, --warmup, --sides, --big, --json).
# Needs: cmake --build build --target ddp-train ddp-sim; scripts/fetch-mnist.sh.
# DDPH_BUILD_DIR picks the build; DDPH_BLAS_DIR another libblas.so.3 for both sides
# (scripts/fetch-openblas.sh), one BLAS thread per rank like one torch thread per rank.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DDPH_BUILD_DIR:-$here/build}
. "$here/benchmarks/blas_env.sh"
export OMP_NUM_THREADS=1
# The ranks' Python: the system one, whose torch is Debian's (the first python3 on PATH may have
# none); DDPH_BENCH_PYTHON another (scripts/torch2-python: torch 2.x). The driver needs no torch.
py=${DDPH_BENCH_PYTHON:-/usr/bin/python3}
exec python3 "$here/benchmarks/audit_overhead.py" --python "$py" \
  --ddp-train "$build/bin/ddp-train" --ddp-sim "$build/bin/ddp-sim" \
  --mnist-dir "${DDPH_MNIST_DIR:-$here/data/mnist}" "$@"
