#!/usr/bin/env bash
# One command for the training-throughput benchmark: ddp-train (reference/) beside Python's torch
# DDP on MNIST, in the same run, with ratios (benchmarks/train_throughput.py does the work).
# ddp-train runs plain at W = 1 and under `ddp-sim launch -n W` above, always with
# `--threads 1 --no-eval --progress none --report-json`; Python runs W rank processes (gloo,
# env://, 127.0.0.1) twice: with a DataLoader, and indexing the tensors directly.
# Arguments go to train_throughput.py (--steps, --warmup, --repeats, --worlds, --json).
# Needs: cmake --build build --target ddp-train ddp-sim; scripts/fetch-mnist.sh.
# DDPH_BUILD_DIR picks the build; DDPH_BLAS_DIR another libblas.so.3 for both sides
# (scripts/fetch-openblas.sh), one BLAS thread per rank like one torch thread per rank.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DDPH_BUILD_DIR:-$here/build}
. "$here/benchmarks/blas_env.sh"
export OMP_NUM_THREADS=1
# Python's torch lives in the system Python (the first python3 on PATH may have none).
# DDPH_BENCH_PYTHON: another one (scripts/gpu-check.sh passes the CUDA torch's interpreter).
exec "${DDPH_BENCH_PYTHON:-/usr/bin/python3}" "$here/benchmarks/train_throughput.py" \
  --ddp-train "$build/bin/ddp-train" --ddp-sim "$build/bin/ddp-sim" \
  --mnist-dir "${DDPH_MNIST_DIR:-$here/data/mnist}" "$@"
